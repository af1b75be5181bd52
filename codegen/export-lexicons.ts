// Writes lexicons/<nsid path>.json for every method a handler file under src/api/ serves and for
// every document their refs reach, taken from the installed @atproto/api. Documents already present under
// lexicons/ that are not official (this server's additions, see docs/decisions.md) are left alone.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { schemas } from '@atproto/api'
import { handlerMethods } from './handlers.ts'

type Doc = { id: string; defs: Record<string, unknown> }

const root = join(import.meta.dirname, '..')
const official = new Map<string, Doc>((schemas as Doc[]).map((d) => [d.id, d]))
const patches = JSON.parse(readFileSync(join(root, 'codegen/patches.json'), 'utf8')) as Record<string, { path: string[]; value: unknown }[]>

const wanted = handlerMethods()

// documents whose `main` def some ref names (a ref without a fragment, or `#main`)
const mainReferenced = new Set<string>()
const refsOf = (node: unknown, out: Set<string>): void => {
  if (Array.isArray(node)) return node.forEach((n) => refsOf(n, out))
  if (!node || typeof node !== 'object') return
  const note = (r: string) => {
    out.add(docId(r))
    const frag = r.replace(/^lex:/, '').split('#')[1]
    if (frag === undefined || frag === 'main') mainReferenced.add(docId(r))
  }
  for (const [k, v] of Object.entries(node)) {
    if (k === 'ref' && typeof v === 'string') note(v)
    else if (k === 'refs' && Array.isArray(v)) v.forEach((r) => note(String(r)))
    else refsOf(v, out)
  }
}

// refs are `nsid`, `nsid#def`, `lex:nsid#def` or local `#def` (which maps to '')
const docId = (ref: string) => ref.replace(/^lex:/, '').split('#')[0]

const seen = new Set<string>()
const toWrite = new Map<string, { id: string; doc: Doc }>()
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
    toWrite.set(file, { id, doc: copy })
  } else {
    // not official: it must be one of ours, committed under lexicons/
    text = readFileSync(file, 'utf8')
  }
  const refs = new Set<string>()
  refsOf(JSON.parse(text), refs)
  for (const r of refs) if (r && r !== id) queue.push(r)
}

// written once every ref is known: a record type reached only for its other defs
// (app.bsky.actor.defs names threadgate rules) is not one we serve, and without its main def the
// generated client needs no com.atproto.repo.* methods for it
for (const [file, { id, doc }] of toWrite) {
  if (!wanted.includes(id) && !mainReferenced.has(id) && (doc.defs.main as { type?: string })?.type === 'record') {
    delete doc.defs.main
  }
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, JSON.stringify(doc, null, 2) + '\n')
}

function setPath(obj: any, path: string[], value: unknown) {
  let o = obj
  for (const k of path.slice(0, -1)) o = o[k] ??= {}
  o[path[path.length - 1]] = value
}

console.log(`exported ${seen.size} lexicon documents`)
