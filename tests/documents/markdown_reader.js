// Reads Markdown documents as a reader's tools do, for tests/documents/test_any_input.py.
// stdin: {"formulas": [TeX, ...], "documents": [Markdown, ...]}. stdout, as JSON:
//   formulas: each KaTeX's MathML ({"mathml": ...}) or its error ({"error": ...}), rendered with throwOnError;
//   documents: each CommonMark's (the reference parser) headings and paragraphs as plain text (code spans'
//   text included, markup excluded) and the destinations of its images.
const katex = require("katex");
const commonmark = require("commonmark");

function plain(node) {
  let text = "";
  const walker = node.walker();
  for (let event = walker.next(); event; event = walker.next()) {
    const kind = event.node.type;
    if (event.entering && (kind === "text" || kind === "code")) text += event.node.literal;
    if (event.entering && (kind === "html_inline" || kind === "softbreak")) text += "\u0000"; // markup, a break
  }
  return text;
}

function read(markdown) {
  const out = { headings: [], paragraphs: [], images: [] };
  const walker = new commonmark.Parser().parse(markdown).walker();
  for (let event = walker.next(); event; event = walker.next()) {
    if (!event.entering) continue;
    const node = event.node;
    if (node.type === "heading") out.headings.push(plain(node));
    if (node.type === "paragraph") out.paragraphs.push(plain(node));
    if (node.type === "image") out.images.push(node.destination);
  }
  return out;
}

function render(formula) {
  try {
    return { mathml: katex.renderToString(formula, { throwOnError: true, displayMode: true, output: "mathml" }) };
  } catch (error) {
    return { error: String(error.message || error) };
  }
}

const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify({ formulas: input.formulas.map(render), documents: input.documents.map(read) }));
