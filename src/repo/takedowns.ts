// Takedowns of single records and blobs: the moderation reference sits on the record or blob row,
// which the reads fetch anyway, so a taken-down one reads as absent at no extra cost and the
// repository itself (its blocks and commits) stays as it is. Reversal clears the reference.
import { xrpcError } from '../errors.js'
import type { Store } from '../db/schema.js'

const RECORD_URI = /^at:\/\/(did:[a-z]+:[a-zA-Z0-9._:%-]+)\/([^/]+)\/([^/]+)$/

/** the DID a record URI names; a URI naming its repository by handle is refused */
export function recordUriDid(uri: string): string {
  const m = RECORD_URI.exec(uri)
  if (!m) throw xrpcError('InvalidRequest', 'A record subject needs an at://<did>/<collection>/<rkey> URI')
  return m[1]
}

const notFound = () => xrpcError('NotFound', 'Subject not found')

export type StatusAttr = { applied: boolean; ref?: string }
const attr = (ref: string | null | undefined): StatusAttr => (ref ? { applied: true, ref } : { applied: ref === '' })

export async function recordStatus(db: Store, uri: string) {
  recordUriDid(uri)
  const row = await db.selectFrom('record').select(['cid', 'takedown_ref']).where('uri', '=', uri).executeTakeFirst()
  if (!row) throw notFound()
  return { subject: { $type: 'com.atproto.repo.strongRef', uri, cid: row.cid }, takedown: attr(row.takedown_ref) }
}

export async function blobStatus(db: Store, did: string, cid: string) {
  const row = await db.selectFrom('blob').select('takedown_ref').where('did', '=', did).where('cid', '=', cid).executeTakeFirst()
  if (!row) throw notFound()
  return { subject: { $type: 'com.atproto.admin.defs#repoBlobRef', did, cid }, takedown: attr(row.takedown_ref) }
}

/** applied: hide the record under `ref` ('' when none was given); otherwise show it again */
export async function setRecordTakedown(db: Store, uri: string, takedown: StatusAttr) {
  recordUriDid(uri)
  const res = await db
    .updateTable('record')
    .set({ takedown_ref: takedown.applied ? (takedown.ref ?? '') : null })
    .where('uri', '=', uri)
    .executeTakeFirst()
  if (res.numUpdatedRows === 0n) throw notFound()
}

export async function setBlobTakedown(db: Store, did: string, cid: string, takedown: StatusAttr) {
  const res = await db
    .updateTable('blob')
    .set({ takedown_ref: takedown.applied ? (takedown.ref ?? '') : null })
    .where('did', '=', did)
    .where('cid', '=', cid)
    .executeTakeFirst()
  if (res.numUpdatedRows === 0n) throw notFound()
}

/**
 * the blocks among `cids` that are the value of taken-down records of `did` alone: a record with
 * the same value that is not taken down (the block counts every record it is the value of) shows it
 */
export async function takenDownValues(db: Store, did: string, cids: string[]): Promise<Set<string>> {
  const out = new Set<string>()
  if (!cids.length) return out
  // along the partial index of taken-down records: none for almost every repository
  const rows = await db
    .selectFrom('record')
    .innerJoin('repo_block', (j) => j.onRef('repo_block.did', '=', 'record.did').onRef('repo_block.cid', '=', 'record.cid'))
    .select(['record.cid as cid', 'repo_block.refs as refs'])
    .where('record.did', '=', did)
    .where('record.takedown_ref', 'is not', null)
    .execute()
  if (!rows.length) return out
  const wanted = new Set(cids)
  const down = new Map<string, number>()
  for (const r of rows) if (wanted.has(r.cid)) down.set(r.cid, (down.get(r.cid) ?? 0) + 1)
  for (const r of rows) if ((down.get(r.cid) ?? 0) >= Number(r.refs)) out.add(r.cid)
  return out
}
