// The repository's quick check: brand.json parses and names the brand.
// Runs in the quick sandbox: an ES module that imports nothing and reads files only via `ctx`.

const REQUIRED_STRINGS = ["name", "slug", "mark"];

export default async (ctx) => {
  const text = await ctx.read("brand.json");
  if (text === null) return { ok: false, message: "brand.json is missing." };
  let brand;
  try {
    brand = JSON.parse(text);
  } catch {
    return { ok: false, message: "brand.json is not valid JSON." };
  }
  if (typeof brand !== "object" || brand === null || Array.isArray(brand)) {
    return { ok: false, message: "brand.json must be a JSON object." };
  }
  const missing = REQUIRED_STRINGS.filter(
    (key) => typeof brand[key] !== "string" || brand[key].trim() === "",
  );
  if (missing.length) {
    return { ok: false, message: `brand.json needs non-empty strings for: ${missing.join(", ")}.` };
  }
  return { ok: true, message: "Checked brand.json." };
};
