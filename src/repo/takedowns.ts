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
