// `format` support. Each string format is an ECMAScript regex (full match)
// describing a subset of what ajv-formats' "full" mode accepts — usually the
// canonical spelling — so everything generated validates, and the same
// regex machinery (structural translation, or automata when combined with
// pattern/length) enforces it.

const DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
const H16 = "[0-9a-fA-F]{1,4}";

// Leap years: YYYY with YY·YY divisible by 4 but not 100, or by 400.
const MULT4 = "(?:0[48]|[2468][048]|[13579][26])";
const LEAP_YEAR = `(?:[0-9]{2}${MULT4}|(?:${MULT4}|00)00)`;
const DATE =
  "(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])" +
  "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)" +
  "|02-(?:0[1-9]|1[0-9]|2[0-8]))" +
  `|${LEAP_YEAR}-02-29)`;
// RFC 3339 full-time with a required offset; leap seconds are not generated.
const TIME = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";

function ipv6(): string {
  const alts = [`(?:${H16}:){7}${H16}`];
  // k groups before "::", up to 7 - k after it.
  for (let k = 0; k <= 7; k++) {
    const before = k === 0 ? "" : `(?:${H16}:){${k - 1}}${H16}`;
    const maxAfter = 7 - k;
    const after = maxAfter === 0 ? "" : `(?:${H16}(?::${H16}){0,${maxAfter - 1}})?`;
    alts.push(`${before}::${after}`);
  }
  return `(?:${alts.join("|")})`;
}

const ATEXT = "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]";
const LABEL = "[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?";
const PCHAR = "(?:[a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2})";
const QCHAR = "(?:[a-zA-Z0-9._~!$&'()*+,;=:@/?-]|%[0-9a-fA-F]{2})";

export const STRING_FORMATS: Record<string, string | null> = {
  date: DATE,
  time: TIME,
  "date-time": `${DATE}[Tt]${TIME}`,
  uuid: "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
  // RFC 5322 dot-atom local part, at least two DNS labels.
  email: `${ATEXT}+(?:\\.${ATEXT}+)*@(?:${LABEL}\\.)+${LABEL}`,
  // scheme ":" ( "//" host [port] path | rootless path ) [query] [fragment]
  uri:
    `[a-zA-Z][a-zA-Z0-9+.-]*:(?://[a-zA-Z0-9-]+(?:\\.[a-zA-Z0-9-]+)*(?::[0-9]{1,5})?(?:/${PCHAR}*)*` +
    `|${PCHAR}+(?:/${PCHAR}*)*)(?:\\?${QCHAR}*)?(?:#${QCHAR}*)?`,
  ipv4: `${DEC_OCTET}(?:\\.${DEC_OCTET}){3}`,
  ipv6: ipv6(),
  byte: "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?",
  // Annotations only, even to ajv-formats.
  password: null,
  binary: null,
};

/** Numeric formats (ajv-formats applies them to numbers). */
export const NUMBER_FORMATS: Record<string, { integer: boolean; min?: number; max?: number }> = {
  int32: { integer: true, min: -(2 ** 31), max: 2 ** 31 - 1 },
  int64: { integer: true },
  float: { integer: false },
  double: { integer: false },
};

export function isKnownFormat(name: string): boolean {
  return name in STRING_FORMATS || name in NUMBER_FORMATS;
}
