// The built modules as ASCII. V8 keeps every module's source for the life of the process, and a
// source with one character outside ASCII (an arrow in a comment, a dash in a lexicon's
// description) is kept at two bytes a character: the generated lexicon module alone held 0.36 MiB
// more that way. An escape means the same character in a string, a regular expression, a template
// or a comment; no module reads its template's raw text (String.raw).
import { readFileSync, writeFileSync } from 'node:fs'

for (const file of process.argv.slice(2)) {
  const text = readFileSync(file, 'utf8')
  const ascii = text.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  if (ascii !== text) writeFileSync(file, ascii)
}
