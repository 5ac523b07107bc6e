// JupyterLab 4.6's stream text processing (@jupyterlab/outputarea, model.ts, Private.processText),
// copied for tests/test_outputs.py: reads a JSON list of chunk lists on stdin, writes the text
// each list shows in an output area.
function indexOfAny(text, re, i) {
  const index = text.slice(i).search(re);
  return index >= 0 ? index + i : index;
}

function processText(index, newText, text) {
  if (text === undefined) {
    text = '';
  }
  if (!(newText.includes('\b') || newText.includes('\r') || newText.includes('\n'))) {
    text = text.slice(0, index) + newText + text.slice(index + newText.length);
    return { text, index: index + newText.length };
  }
  let idx0 = index;
  let idx1 = -1;
  let lastEnd = 0;
  const regex = /[\n\b\r]/;
  while (true) {
    idx1 = indexOfAny(newText, regex, lastEnd);
    const prefix = newText.slice(lastEnd, idx1 === -1 ? newText.length : idx1);
    text = text.slice(0, idx0) + prefix + text.slice(idx0 + prefix.length);
    lastEnd = idx1 + 1;
    idx0 += prefix.length;
    if (idx1 === -1) {
      break;
    }
    const newChar = newText[idx1];
    if (newChar === '\b') {
      if (idx0 > 0 && text[idx0 - 1] !== '\n') {
        text = text.slice(0, idx0 - 1) + text.slice(idx0 + 1);
        idx0--;
      }
    } else if (newChar === '\r') {
      let done = false;
      while (!done) {
        if (idx0 === 0) {
          done = true;
        } else if (text[idx0 - 1] === '\n') {
          done = true;
        } else {
          idx0--;
        }
      }
    } else if (newChar === '\n') {
      text = text + '\n';
      idx0 = text.length;
    }
  }
  return { text, index: idx0 };
}

const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const shown = cases.map(chunks => {
  let state = { text: '', index: 0 };
  for (const chunk of chunks) {
    state = processText(state.index, chunk, state.text);
  }
  return state.text;
});
process.stdout.write(JSON.stringify(shown));
