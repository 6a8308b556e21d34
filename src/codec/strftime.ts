// Python-style strftime for chat templates' `strftime_now(fmt)` (Llama 3.x and
// others print today's date into the system prompt). Local time and English
// names, as Python's datetime.strftime gives under the default C locale.

const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];
const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

const pad = (n: number, width = 2, fill = "0") => String(n).padStart(width, fill);

function dayOfYear(d: Date): number {
  const start = new Date(d.getFullYear(), 0, 1);
  return (
    Math.round((new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime() - start.getTime()) / 86_400_000) + 1
  );
}

function utcOffset(d: Date): string {
  const minutes = -d.getTimezoneOffset();
  const sign = minutes < 0 ? "-" : "+";
  const abs = Math.abs(minutes);
  return `${sign}${pad(Math.floor(abs / 60))}${pad(abs % 60)}`;
}

const DIRECTIVES: Record<string, (d: Date) => string> = {
  Y: (d) => String(d.getFullYear()),
  y: (d) => pad(d.getFullYear() % 100),
  m: (d) => pad(d.getMonth() + 1),
  d: (d) => pad(d.getDate()),
  e: (d) => pad(d.getDate(), 2, " "),
  j: (d) => pad(dayOfYear(d), 3),
  B: (d) => MONTHS[d.getMonth()]!,
  b: (d) => MONTHS[d.getMonth()]!.slice(0, 3),
  h: (d) => MONTHS[d.getMonth()]!.slice(0, 3),
  A: (d) => DAYS[d.getDay()]!,
  a: (d) => DAYS[d.getDay()]!.slice(0, 3),
  w: (d) => String(d.getDay()),
  H: (d) => pad(d.getHours()),
  I: (d) => pad(d.getHours() % 12 === 0 ? 12 : d.getHours() % 12),
  M: (d) => pad(d.getMinutes()),
  S: (d) => pad(d.getSeconds()),
  p: (d) => (d.getHours() < 12 ? "AM" : "PM"),
  z: utcOffset,
  F: (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`,
  T: (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`,
  D: (d) => `${pad(d.getMonth() + 1)}/${pad(d.getDate())}/${pad(d.getFullYear() % 100)}`,
  "%": () => "%",
};

/** Formats `date` like Python's `date.strftime(format)`; unknown directives are left as written. */
export function strftime(date: Date, format: string): string {
  return format.replace(/%(.)/gs, (whole, c: string) => DIRECTIVES[c]?.(date) ?? whole);
}
