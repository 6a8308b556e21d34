// `import path from "./shim.c" with { type: "file" }` gives the file's path
// (a real path from source, an embedded $bunfs path in the compiled binary).
declare module "*.c" {
  const path: string;
  export default path;
}
