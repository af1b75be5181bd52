// Our accounts' DID documents, remembered by DID together with the CID of the PLC operation they
// were rendered from. A caller passes the newest operation's CID it read with the account row, so
// a document is served only while that operation is still the newest, whichever process (or
// handle update, migration, key rotation) appended a later one.
import { prepared } from '../db/prepared.js'
import { sql } from 'kysely'
import { renderDidDoc, type DidDocument } from './plc.js'
import type { Store } from '../db/schema.js'

/** about 1 KiB each */
const MAX_ENTRIES = 4096

const newestOp = prepared((db: Store, did: string) =>
  db.selectFrom('plc_operation').select(['cid', 'operation']).where('did', '=', did).orderBy('seq', 'desc').limit(sql.lit(1)),
)

const docs = new Map<string, { cid: string; doc: DidDocument }>()

/** the DID document of the operation `headCid` names (or of a newer one); none without a log */
export async function didDocAtHead(db: Store, did: string, headCid: string | null): Promise<DidDocument | undefined> {
  if (headCid === null) return undefined
  const hit = docs.get(did)
  if (hit && hit.cid === headCid) {
    // least recently used goes first
    docs.delete(did)
    docs.set(did, hit)
    return hit.doc
  }
  const [row] = await newestOp(db, did)
  if (!row) return undefined
  const doc = deepFreeze(renderDidDoc(did, JSON.parse(row.operation)))
  docs.delete(did)
  if (docs.size >= MAX_ENTRIES) docs.delete(docs.keys().next().value as string)
  docs.set(did, { cid: row.cid, doc })
  return doc
}

// one document object is shared by every response that carries it
function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x)
    Object.freeze(v)
  }
  return v
}
