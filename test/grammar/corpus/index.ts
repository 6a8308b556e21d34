import { arrays } from "./arrays.ts";
import { basic } from "./basic.ts";
import type { Case } from "./case.ts";
import { composition } from "./composition.ts";
import { numbers } from "./numbers.ts";
import { objects } from "./objects.ts";
import { realistic } from "./realistic.ts";
import { lenient, refused } from "./refused.ts";
import { strings } from "./strings.ts";

export type { Case, Refused } from "./case.ts";
export { refused };

/** Every schema the compiler must accept. */
export const accepted: Case[] = [
  ...basic,
  ...strings,
  ...numbers,
  ...objects,
  ...arrays,
  ...composition,
  ...realistic,
  ...lenient,
];
