// A Svelte action for a box that scrolls on its own (a wide table, long output): while its content
// overflows it is reachable by keyboard (tabindex 0), so it can be scrolled without a mouse; while it
// does not, it is no tab stop.
export function scrollable(node) {
  const update = () => {
    const overflows = node.scrollWidth > node.clientWidth + 1 || node.scrollHeight > node.clientHeight + 1;
    if (overflows) node.tabIndex = 0;
    else node.removeAttribute("tabindex");
  };
  const resize = new ResizeObserver(update);
  resize.observe(node);
  const changes = new MutationObserver(update);
  changes.observe(node, { childList: true, subtree: true, attributes: true, attributeFilter: ["open"], characterData: true });
  update();
  return { destroy() { resize.disconnect(); changes.disconnect(); } };
}
