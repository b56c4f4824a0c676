/**
 * Building the page: every node through createElement / createElementNS and every piece of data as
 * textContent. Nothing here parses HTML: all data is untrusted (work item titles, error text, act
 * commands, terminal output), so an `<img onerror=…>` in it stays text.
 */

export type Child = Node | string | number | null | undefined | false;
export type Attrs = Record<string, string | number | boolean | null | undefined>;

/**
 * Why some attributes are refused: `style` would be an inline style (the CSP refuses it, and the
 * house rule says classes), `on…` would be inline script, `srcdoc` is HTML.
 */
function checkName(name: string): void {
  const lower = name.toLowerCase();
  if (lower === 'style' || lower === 'srcdoc' || lower.startsWith('on')) {
    throw new Error(`refused attribute ${name}: use classes and listeners`);
  }
}

function setAttrs(node: Element, attrs: Attrs | undefined): void {
  if (!attrs) return;
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    checkName(name);
    node.setAttribute(name, value === true ? '' : String(value));
  }
}

function append(node: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element with attributes and children (strings become text nodes). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element (the usage chart): attributes and classes, never inline style. */
export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs?: Attrs,
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

/** Replace a node's children. */
export function fill(node: Element, ...children: Child[]): void {
  node.replaceChildren();
  append(node, children);
}

/** The element with this id, which the page's HTML template provides. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (!node) throw new Error(`the page has no #${id}`);
  return node as T;
}

/** A table with a caption-less head and body rows (semantic: th scope=col). */
export function table(headers: readonly string[], rows: readonly HTMLTableRowElement[]): HTMLTableElement {
  return h(
    'table',
    {},
    h('thead', {}, h('tr', {}, ...headers.map((label) => h('th', { scope: 'col' }, label)))),
    h('tbody', {}, ...rows),
  );
}

/** A table cell; `num` right-aligns figures. */
export function td(content: Child, num = false): HTMLTableCellElement {
  return h('td', num ? { class: 'num' } : {}, content);
}

/** A short message in place of content (loading, empty, failure). */
export function note(text: string, kind: 'info' | 'error' = 'info'): HTMLParagraphElement {
  return h('p', { class: `note note-${kind}`, role: kind === 'error' ? 'alert' : null }, text);
}
