import * as React from 'react';

/**
 * How close to the bottom (px) still counts as "at the bottom".
 */
const SLACK = 24;

/**
 * Keep a scrolling element at its bottom as its content grows (messages
 * stream in, Markdown renders after React has committed, images load),
 * unless the user has scrolled up: then it stays where they are until they
 * scroll back down to the bottom. A change of `restart` (a request sent)
 * follows the bottom again.
 */
export function useFollowNewest(
  ref: React.RefObject<HTMLElement | null>,
  restart: unknown
): void {
  const pinned = React.useRef(true);
  React.useEffect(() => {
    const node = ref.current;
    if (!node) {
      return;
    }
    // The scrollTop this hook set last: a scroll event that lands there is
    // ours (the content may have grown since), any other is the user's
    // (wheel, keys, the scrollbar).
    let ours = -1;
    const follow = (): void => {
      if (pinned.current && node.scrollHeight > node.clientHeight) {
        node.scrollTop = node.scrollHeight;
        ours = node.scrollTop;
      }
    };
    const onScroll = (): void => {
      if (node.scrollHeight - node.scrollTop - node.clientHeight <= SLACK) {
        pinned.current = true;
      } else if (node.scrollTop !== ours) {
        pinned.current = false; // the user scrolled up
      }
    };
    const mutations = new MutationObserver(follow);
    mutations.observe(node, {
      childList: true,
      subtree: true,
      characterData: true
    });
    // The box changes size (the panel is shown, the compose box grows), and
    // content changes size without changing the DOM (an image loads).
    const sizes = new ResizeObserver(follow);
    sizes.observe(node);
    const watchImages = (event: Event): void => {
      if (event.target instanceof HTMLImageElement) {
        follow();
      }
    };
    node.addEventListener('load', watchImages, true);
    node.addEventListener('scroll', onScroll, { passive: true });
    follow();
    return () => {
      mutations.disconnect();
      sizes.disconnect();
      node.removeEventListener('load', watchImages, true);
      node.removeEventListener('scroll', onScroll);
    };
  }, [ref]);
  React.useEffect(() => {
    pinned.current = true;
    const node = ref.current;
    if (node) {
      node.scrollTop = node.scrollHeight;
    }
  }, [ref, restart]);
}
