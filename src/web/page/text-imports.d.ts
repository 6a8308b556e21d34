// assets.ts imports the page's stylesheet `with { type: "text" }`: Bun hands
// over its text, which is all TypeScript needs to know of it.
declare module "*.css" {
  const text: string;
  export default text;
}
