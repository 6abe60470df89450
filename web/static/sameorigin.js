// sameOriginPath returns v when it is a path of the page's own origin, as
// the browser resolves it, and null otherwise: the pages take their ops base
// and WebSocket path from the query string only then, so that a link cannot
// send the token the user enters elsewhere.
export function sameOriginPath(v) {
  if (typeof v !== "string" || !v.startsWith("/")) return null;
  // A path of this origin only, as the browser resolves it: URL parsing
  // drops tabs and newlines, so "/\t/evil.example" is "//evil.example".
  if (/[\u0000-\u001f\\]/.test(v)) return null;
  let u;
  try {
    u = new URL(v, location.href);
  } catch {
    return null;
  }
  return u.origin === location.origin ? v : null;
}
