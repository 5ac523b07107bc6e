import './base.css';
import './notebook.css';
import './chat.css';
import './actions.css';
