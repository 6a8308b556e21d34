// The vocabulary the HTTP benches build their prompts from. Each script
// seeds its own sequences; what they share is the words: leads whose first
// letters all differ (so consecutive prompts differ from their first token,
// even under a byte-level tokenizer) and number words for the rest.
export const LEAD_WORDS = [
  "amber", "bronze", "cobalt", "denim", "ebony", "fuchsia", "garnet", "hazel", "indigo", "jade", "khaki", "lilac",
  "maroon", "navy", "olive", "plum", "quartz", "rust", "sepia", "teal", "umber", "violet", "wheat", "xanadu",
  "yellow", "zinc",
];
export const NUMBER_WORDS = [
  "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
  "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty",
  "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "thousand", "million",
];
