// An example of the `stat` API for SMALL snapshots; deliberately not registered.
//
// It fails on any regular file of 10,000,000 bytes or more without reading file contents.
// Serial stat calls over a whole repository can exceed the quick tier's 10-second deadline
// and its budgets, so the repository runs the `large-files` full check instead.

const LIMIT_BYTES = 10_000_000;

export default async (ctx) => {
  const large = [];
  for (const path of await ctx.list("")) {
    const stat = await ctx.stat(path);
    if (stat !== null && stat.size >= LIMIT_BYTES) large.push(path);
  }
  if (large.length) {
    return { ok: false, message: `Files of 10 MB or more: ${large.slice(0, 20).join(", ")}.` };
  }
  return { ok: true, message: "No file is 10 MB or larger." };
};
