// Which files of a repository a reference means, the way llama.cpp's -hf
// chooses them: with no tag, the Q4_K_M file, else Q4_0, else the first
// model GGUF; a tag matches the quant in a file name in any case (or is a
// whole file name); a split model is all its `-NNNNN-of-NNNNN` parts; the
// vision projector is the `mmproj` GGUF nearest the model (same folder first,
// then the fewest bits). Works on repo-relative paths, so the same choice
// runs over the Hub's file list and over a cached snapshot.
import { HubError } from "./errors.ts";

export interface FileChoice {
  /** The model's files: one, or every part of a split model in order. */
  model: string[];
  /** The projector beside it, when the repo has one. */
  mmproj?: string;
}

const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/i;
const isGguf = (path: string) => /\.gguf$/i.test(path);
const isProjector = (path: string) => /mmproj/i.test(baseName(path));
const baseName = (path: string) => path.slice(path.lastIndexOf("/") + 1);
const folderOf = (path: string) => path.slice(0, Math.max(0, path.lastIndexOf("/")));

/**
 * A GGUF's quant as its name writes it (`Q4_K_M`, `UD-Q4_K_XL`, `IQ2_XXS`, `F16`, `BF16`, `MXFP4`), or undefined.
 * The last match wins: `Llama-3-8B-Q4_K_M` names the quant last.
 */
export function quantOf(path: string): string | undefined {
  const stem = baseName(path)
    .replace(/\.gguf$/i, "")
    .replace(/-\d{5}-of-\d{5}$/i, "");
  const matches = [
    ...stem.matchAll(
      /(?:^|[-_.])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|[BM]?F(?:16|32)|BF16|MXFP4(?:_MOE)?|TQ\d_\d))(?=$|[-_.])/gi,
    ),
  ];
  return matches.at(-1)?.[1]?.toUpperCase();
}

/** A file's first split part (or the file itself): the file a model is named by. */
function isFirstPart(path: string): boolean {
  const m = SPLIT.exec(path);
  return !m || Number(m[1]) === 1;
}

/** Every part of the split model whose first part is `first`, in order; `[first]` when it is not split. */
function partsOf(first: string, all: string[]): string[] {
  const m = SPLIT.exec(first);
  if (!m) return [first];
  const count = Number(m[2]);
  const prefix = first.slice(0, m.index);
  const parts: string[] = [];
  for (let i = 1; i <= count; i++) {
    const name = `${prefix}-${String(i).padStart(5, "0")}-of-${m[2]}.gguf`;
    const found = all.find((p) => p.toLowerCase() === name.toLowerCase());
    if (!found) throw new HubError("no_file", `the split model ${baseName(first)} lacks its part ${baseName(name)}`);
    parts.push(found);
  }
  return parts;
}

/** The quants a repo offers, for the message that no file matched. */
export function quantsIn(paths: string[]): string[] {
  const models = paths.filter((p) => isGguf(p) && !isProjector(p) && isFirstPart(p));
  return [...new Set(models.map((p) => quantOf(p) ?? baseName(p)))];
}

/** Bits a projector's type spends per weight (F32 > F16 > Q8 ...), for "the fewest bits" among equals. */
function bitsOf(path: string): number {
  const q = quantOf(path) ?? "";
  const m = /(\d+)/.exec(q.replace(/^UD-/, "").replace(/^I?Q/, ""));
  if (/^[BM]?F32/.test(q)) return 32;
  if (/F16/.test(q)) return 16;
  return m ? Number(m[1]) : 64;
}

/** The projector nearest the model: in its folder first, then one folder up or down, then anywhere; fewest bits. */
function nearestProjector(model: string, paths: string[]): string | undefined {
  const projectors = paths.filter((p) => isGguf(p) && isProjector(p));
  if (projectors.length === 0) return undefined;
  const home = folderOf(model);
  const distance = (p: string) => {
    const f = folderOf(p);
    if (f === home) return 0;
    if (f.startsWith(`${home}/`) || home.startsWith(`${f}/`) || f === "" || home === "") return 1;
    return 2;
  };
  return [...projectors].sort((a, b) => distance(a) - distance(b) || bitsOf(a) - bitsOf(b) || a.localeCompare(b))[0];
}

/** llama.cpp's order when no tag is given. */
const DEFAULT_QUANTS = ["Q4_K_M", "Q4_0"];

/** The files `tag` means among a repo's paths, or a HubError of kind `no_file` naming the quants there are. */
export function chooseFiles(repo: string, paths: string[], tag: string | undefined): FileChoice {
  const models = paths.filter((p) => isGguf(p) && !isProjector(p) && isFirstPart(p)).sort();
  let first: string | undefined;
  if (tag === undefined) {
    for (const quant of DEFAULT_QUANTS) {
      first = models.find((p) => quantOf(p) === quant);
      if (first) break;
    }
    first ??= models[0];
  } else {
    const wanted = tag.toLowerCase();
    // A whole file name (or path) first, then the quant in the name, then the tag anywhere in the name.
    first =
      paths.find((p) => isGguf(p) && (p.toLowerCase() === wanted || baseName(p).toLowerCase() === wanted)) ??
      models.find((p) => quantOf(p)?.toLowerCase() === wanted) ??
      models.find((p) => quantOf(p)?.toLowerCase() === `ud-${wanted}`) ??
      models.find((p) => baseName(p).toLowerCase().includes(wanted));
    // A part other than the first, named whole, means the whole split model.
    if (first && !isFirstPart(first)) first = first.replace(SPLIT, (_, _i, n) => `-00001-of-${n}.gguf`);
  }
  if (!first) {
    const quants = quantsIn(paths);
    const offer = quants.length > 0 ? `; it has ${quants.join(", ")}` : "; it has no GGUF file";
    throw new HubError(
      "no_file",
      tag === undefined ? `${repo} has no GGUF model file${offer}` : `${repo} has no GGUF file for '${tag}'${offer}`,
    );
  }
  const model = partsOf(first, paths);
  const mmproj = isProjector(first) ? undefined : nearestProjector(first, paths);
  return mmproj === undefined ? { model } : { model, mmproj };
}
