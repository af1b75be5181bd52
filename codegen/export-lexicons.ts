// Writes lexicons/<nsid path>.json for every method id in codegen/methods.txt and for every
// document their refs reach, taken from the installed @atproto/api. Documents already present
// under lexicons/ that are not official (the additions DECISIONS.md lists) are left alone.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { schemas } from '@atproto/api'

type Doc = { id: string; defs: Record<string, unknown> }

const root = join(import.meta.dirname, '..')
const official = new Map<string, Doc>((schemas as Doc[]).map((d) => [d.id, d]))
const patches = JSON.parse(readFileSync(join(root, 'codegen/patches.json'), 'utf8')) as Record<
  string,
  { path: string[]; value: unknown }[]
>

const wanted = readFileSync(join(root, 'codegen/methods.txt'), 'utf8')
  .split('\n')
  .map((l) => l.replace(/#.*/, '').trim())
  .filter(Boolean)

const refsOf = (node: unknown, out: Set<string>): void => {
  if (Array.isArray(node)) return node.forEach((n) => refsOf(n, out))
  if (!node || typeof node !== 'object') return
  for (const [k, v] of Object.entries(node)) {
    if (k === 'ref' && typeof v === 'string') out.add(docId(v))
    else if (k === 'refs' && Array.isArray(v)) v.forEach((r) => out.add(docId(String(r))))
    else refsOf(v, out)
  }
}

// refs are `nsid`, `nsid#def`, `lex:nsid#def` or local `#def` (which maps to '')
const docId = (ref: string) => ref.replace(/^lex:/, '').split('#')[0]

const seen = new Set<string>()
const queue = [...wanted]
while (queue.length) {
  const id = queue.shift()!
  if (seen.has(id) || id === '') continue
  seen.add(id)
  const doc = official.get(id)
  const file = join(root, 'lexicons', ...id.split('.')) + '.json'
  let text: string
  if (doc) {
    const copy = structuredClone(doc)
    for (const p of patches[id] ?? []) setPath(copy, p.path, p.value)
    text = JSON.stringify(copy, null, 2) + '\n'
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, text)
  } else {
    // not official: it must be one of ours, committed under lexicons/
    text = readFileSync(file, 'utf8')
  }
  const refs = new Set<string>()
  refsOf(JSON.parse(text), refs)
  for (const r of refs) if (r && r !== id) queue.push(r)
}

function setPath(obj: any, path: string[], value: unknown) {
  let o = obj
  for (const k of path.slice(0, -1)) o = o[k] ??= {}
  o[path[path.length - 1]] = value
}

console.log(`exported ${seen.size} lexicon documents`)
