// assets.ts imports app.js `with { type: "text" }` (the page's script, served
// to the browser, never run by the server): what it gets is the file's text.
declare const text: string;
export default text;
