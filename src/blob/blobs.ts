// Blob metadata around the blob store: an upload becomes a row of the uploading account, kept while
// a record references it; the sweeper (blobstore-gc.ts) removes the rest after a grace period.
import type { Readable } from 'node:stream'
import type { Db } from '../db/index.js'
import type { Store } from '../db/schema.js'
import type { BlobStore } from './blobstore.js'
import { preparedChange } from '../db/prepared.js'
import { XRPCError } from '@atproto/xrpc-server'
import { xrpcError } from '../errors.js'
import { withCidLock } from './blobstore-gc.js'

// One write statement, so on SQLite it takes the write lock first; a blob some record already
// references (written before its upload finished) is referenced from the start. A repeated upload
// restarts the grace period.
const insertBlob = preparedChange((db, did: string, cid: string, mimeType: string, size: number, at: string) =>
  db
    .insertInto('blob')
    .values((eb) => ({
      did,
      cid,
      mime_type: mimeType,
      size,
      referenced: eb
        .case()
        .when(eb.exists(eb.selectFrom('record_blob').select('record_uri').where('did', '=', did).where('blob_cid', '=', cid)))
        .then(1)
        .else(0)
        .end(),
      created_at: at,
    }))
    .onConflict((oc) =>
      oc.columns(['did', 'cid']).doUpdateSet((eb) => ({
        created_at: eb.ref('excluded.created_at'),
        referenced: eb.case().when('excluded.referenced', '=', 1).then(1).else(eb.ref('blob.referenced')).end(),
      })),
    ),
)

// An upload the bucket refused is worth retrying as it is: the uploader hears 503 (try again
// later), as for a bucket that timed out (504), where a read of a stored blob hears 502.
function retryLater(err: unknown): never {
  if (err instanceof XRPCError && err.customErrorName === 'UpstreamFailure') {
    throw xrpcError('TemporarilyUnavailable', 'The blob store could not be reached; try the upload again later', undefined, err)
  }
  throw err
}

export async function storeUpload(deps: { db: Db; blobstore: BlobStore }, did: string, input: Readable, mimeType: string, limit: number) {
  const { db, blobstore } = deps
  const staged = await blobstore.stage(input, limit).catch(retryLater)
  try {
    await blobstore.commit(staged).catch(retryLater)
    const now = new Date().toISOString()
    await withCidLock(db, staged.cid, async (trx) => {
      await insertBlob(trx, did, staged.cid, mimeType, staged.size, now)
      // the sweeper may have removed these bytes between our commit and this lock: put them back
      if (!(await blobstore.has(staged.cid))) await blobstore.commit(staged)
    })
  } finally {
    await blobstore.discard(staged).catch(() => {})
  }
  return { cid: staged.cid, size: staged.size, mimeType }
}

/** CIDs of the blobs `did`'s records reference, in CID order after `cursor`; `since`: only records written after that rev */
export async function referencedBlobCids(
  db: Store,
  did: string,
  page: { limit: number; cursor?: string; since?: string },
): Promise<string[]> {
  let q = db
    .selectFrom('record_blob')
    .select('record_blob.blob_cid')
    .distinct()
    .where('record_blob.did', '=', did)
    .orderBy('record_blob.blob_cid')
    .limit(page.limit)
  if (page.cursor) q = q.where('record_blob.blob_cid', '>', page.cursor)
  if (page.since) q = q.innerJoin('record', 'record.uri', 'record_blob.record_uri').where('record.rev', '>', page.since)
  const rows = await q.execute()
  return rows.map((r) => r.blob_cid)
}

/** the stored MIME type and size of a blob `did` holds; undefined when absent or taken down */
export async function servableBlob(db: Store, did: string, cid: string) {
  return db
    .selectFrom('blob')
    .select(['mime_type', 'size'])
    .where('did', '=', did)
    .where('cid', '=', cid)
    .where('takedown_ref', 'is', null)
    .executeTakeFirst()
}

/**
 * A stored blob as an XRPC answer: its bytes under their stored MIME type, sandboxed so a browser
 * never runs them as this origin's content; `extra` adds headers (a download disposition).
 */
export function blobAnswer(mimeType: string, found: { stream: Readable; size: number }, extra: Record<string, string> = {}) {
  return {
    encoding: mimeType as '*/*',
    body: found.stream,
    headers: {
      'content-length': String(found.size),
      'x-content-type-options': 'nosniff',
      ...extra,
      'content-security-policy': "default-src 'none'; sandbox",
    },
  }
}
