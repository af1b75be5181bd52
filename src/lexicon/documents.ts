// Lexicon documents published as records: the `com.atproto.lexicon.schema` collection holds one
// document per NSID, keyed by that NSID. The record schema itself only asks for a `lexicon`
// version, so the document is checked here as a whole (the official lexicon-document schema), both
// when an account writes one and when a published one is read for resolution.
import { lexiconDoc, type LexiconDoc } from '@atproto/lexicon'

export const LEXICON_SCHEMA_COLLECTION = 'com.atproto.lexicon.schema'

export class LexiconDocError extends Error {}

/** the document a schema record holds; LexiconDocError saying what is wrong otherwise */
export function parseLexiconRecord(value: unknown, rkey: string): LexiconDoc {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new LexiconDocError('the record must be an object')
  // the record's own $type is not part of the document
  const { $type: _type, ...doc } = value as Record<string, unknown>
  const r = lexiconDoc.safeParse(doc)
  if (!r.success) {
    const issue = r.error.issues[0]
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : ''
    throw new LexiconDocError(`not a valid lexicon document (${where}${issue?.message ?? 'invalid'})`)
  }
  // resolution looks a document up by the NSID it defines
  if (r.data.id !== rkey) throw new LexiconDocError(`the record key must be the document's id (${r.data.id}), not ${rkey}`)
  return r.data
}
