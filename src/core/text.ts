/** One line of untrusted text made safe for a terminal: control characters become spaces, length bounded. */
export function oneLine(text: string, max = 160): string {
  const clean = text.replace(/[\u0000-\u001f\u007f-\u009f]+/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}
