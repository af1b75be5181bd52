// Lexicon documents published as records: the `com.atproto.lexicon.schema` collection holds one
// document per NSID, keyed by that NSID. The record schema itself only asks for a `lexicon`
// version, so the document is checked here as a whole (the official lexicon-document schema), both
// when an account writes one and when a published one is read for resolution. A space type
// declaration (a main definition of type `space`) is newer than that schema and is checked here.
import { lexiconDoc, type LexiconDoc } from '@atproto/lexicon'
import { isValidNsid } from '@atproto/syntax'

export const LEXICON_SCHEMA_COLLECTION = 'com.atproto.lexicon.schema'

export class LexiconDocError extends Error {}

/** what a space type declares: its record key kind, a name for people, the collections it holds */
export type SpaceDeclaration = {
  type: 'space'
  key: string
  name: string
  'name:lang'?: Record<string, string>
  description?: string
  collections: string[]
}

/** a published document: an official lexicon document, whose main definition may declare a space type */
export type PublishedLexicon = Omit<LexiconDoc, 'defs'> & { defs: Record<string, LexiconDoc['defs'][string] | SpaceDeclaration> }

/** the document a schema record holds; LexiconDocError saying what is wrong otherwise */
export function parseLexiconRecord(value: unknown, rkey: string): PublishedLexicon {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new LexiconDocError('the record must be an object')
  // the record's own $type is not part of the document
  const { $type: _type, ...doc } = value as Record<string, unknown>
  const defs = doc.defs as Record<string, unknown> | undefined
  const space = defs && typeof defs === 'object' && (defs.main as { type?: unknown } | undefined)?.type === 'space'
  let declaration: SpaceDeclaration | undefined
  if (space) {
    const { main, ...rest } = defs
    declaration = parseSpaceDeclaration(main)
    doc.defs = rest
  }
  const r = lexiconDoc.safeParse(doc)
  if (!r.success) {
    const issue = r.error.issues[0]
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : ''
    throw new LexiconDocError(`not a valid lexicon document (${where}${issue?.message ?? 'invalid'})`)
  }
  // resolution looks a document up by the NSID it defines
  if (r.data.id !== rkey) throw new LexiconDocError(`the record key must be the document's id (${r.data.id}), not ${rkey}`)
  return declaration ? { ...r.data, defs: { ...r.data.defs, main: declaration } } : r.data
}

const MAX_NAME = 64

function parseSpaceDeclaration(main: unknown): SpaceDeclaration {
  const bad = (why: string) => new LexiconDocError(`not a valid space type declaration (defs.main: ${why})`)
  const d = main as Record<string, unknown>
  if (typeof d.key !== 'string' || !d.key) throw bad('key must be a non-empty string')
  if (typeof d.name !== 'string' || d.name.length < 1 || [...d.name].length > MAX_NAME)
    throw bad(`name must be 1 to ${MAX_NAME} characters`)
  const langs = d['name:lang']
  if (langs !== undefined) {
    if (!langs || typeof langs !== 'object' || Array.isArray(langs)) throw bad('name:lang must be an object')
    for (const v of Object.values(langs))
      if (typeof v !== 'string' || v.length < 1 || [...v].length > MAX_NAME) throw bad(`each name:lang must be 1 to ${MAX_NAME} characters`)
  }
  if (d.description !== undefined && typeof d.description !== 'string') throw bad('description must be a string')
  if (!Array.isArray(d.collections) || !d.collections.every((c) => typeof c === 'string' && isValidNsid(c)))
    throw bad('collections must be a list of NSIDs')
  return {
    type: 'space',
    key: d.key,
    name: d.name,
    ...(langs !== undefined && { 'name:lang': langs as Record<string, string> }),
    ...(d.description !== undefined && { description: d.description }),
    collections: [...(d.collections as string[])],
  }
}
