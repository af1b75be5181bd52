// importRepo (part 2 §4.9 with DECISIONS.md 11 to 13): the CAR is streamed and every block checked
// against its CID; the root commit must be version 3 for the caller's DID and signed by the
// reserved key or a key the DID's log has named; the tree is then re-signed with the account's
// key. Blocks, head, record index, record→blob references, counters, migration_state and the
// event land in ONE transaction (DECISIONS.md 12): a failure leaves nothing, so a retry just works.
// Tens of thousands of blocks per call: the CAR, tree and records are read by the byte-level
// decoders in repo/ (car-blocks, mst-walk, record-scan), the rows written by multi-row INSERTs.
import type { Readable } from 'node:stream'
import { hash } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { XRPCError } from '@atproto/xrpc-server'
import { BlockMap, MemoryBlockstore, MST, verifyCommitSig, type Commit } from '@atproto/repo'
import { TID } from '@atproto/common'
import { parseCid } from '@atproto/lex-data'
import { isValidTid } from '@atproto/syntax'
import type { Services } from '../context.js'
import type { Db } from '../db/index.js'
import { bulkInsert } from '../db/bulk-insert.js'
import { xrpcError } from '../errors.js'
import { readCarBlocks, type CarBlocks } from '../repo/car-blocks.js'
import { cidKey, dagCborCid, keyToCidString } from '../repo/cid-string.js'
import { appendCommitOrSync, appendSyncEvent, MAX_COMMIT_OPS } from '../repo/events.js'
import { MstError, walkMst } from '../repo/mst-walk.js'
import { blobRefs } from '../repo/prepare.js'
import { scanRecord } from '../repo/record-scan.js'
import { signingKeyFor } from '../repo/writer.js'

/** test-only fault injection: called inside the import transaction once the records are indexed */
export type ImportHooks = { afterRecordsIndexed?: (did: string) => void | Promise<void> }

const CHUNK = 200
const AUDIT_TIMEOUT_MS = 10_000

type Deps = Pick<Services, 'db' | 'config' | 'logger'> & { hooks?: ImportHooks }

type ImportedRecord = { path: string; collection: string; rkey: string; cid: string; blobs: string[] }

export async function importRepo(deps: Deps, did: string, body: Readable) {
  const { db } = deps
  if (await hasRecords(db, did)) throw repoNotEmpty()
  const { roots, blocks } = await readCar(body)
  if (roots.length !== 1) throw xrpcError('InvalidCar', `The CAR must have exactly one root, not ${roots.length}`)

  // step 3: the root is a version-3 commit of the caller's DID
  const rootBytes = blocks.get(roots[0])
  if (!rootBytes) throw xrpcError('InvalidCar', 'The CAR does not hold its root block')
  const commit = decodeCommit(rootBytes)
  if (commit.did !== did) throw xrpcError('InvalidRequest', `The commit is for ${commit.did}, not ${did}`)

  // step 4 with DECISIONS.md 11
  const keypair = await signingKeyFor(db, did)
  if (!(await verifyCommitSig(commit, keypair.did()))) {
    const keys = await previousKeys(deps, did)
    let ok = false
    for (const k of keys) if (!ok && k !== keypair.did()) ok = await verifyCommitSig(commit, k).catch(() => false)
    if (!ok) {
      throw xrpcError(
        'InvalidRequest',
        deps.config.plcUrl
          ? 'The commit signature matches neither the reserved key nor any key of the DID\'s log'
          : 'The commit is not signed by the reserved key, and without a PLC directory (PDS_DID_PLC_URL) this server cannot learn the DID\'s previous keys',
      )
    }
  }

  // the tree: every node and record must be in the CAR; only reachable blocks are kept
  let tree: ReturnType<typeof walkMst>
  try {
    tree = walkMst(cidKey(commit.data.bytes), (key) => blocks.get(key))
  } catch (err) {
    if (err instanceof MstError) throw xrpcError('InvalidCar', `The repository tree is incomplete or malformed: ${err.message}`)
    throw err
  }
  // by cidKey, each with its CID string (what the store keys on)
  const kept = new Map<string, { cid: string; bytes: Buffer }>()
  const keep = (key: string, bytes: Buffer) => {
    let block = kept.get(key)
    if (!block) kept.set(key, (block = { cid: keyToCidString(key), bytes }))
    return block.cid
  }
  for (const key of tree.nodes) keep(key, blocks.get(key)!)
  const records: ImportedRecord[] = tree.leaves.map((l) => {
    const bytes = blocks.get(l.cid)
    if (!bytes) throw xrpcError('InvalidCar', `The CAR is missing block ${keyToCidString(l.cid)} (record ${l.key})`)
    const slash = l.key.indexOf('/')
    return { path: l.key, collection: l.key.slice(0, slash), rkey: l.key.slice(slash + 1), cid: keep(l.cid, bytes), blobs: recordBlobs(l.key, bytes) }
  })

  return db.transaction().execute(async (trx) => {
    // the account row always exists (repo_root may not yet): concurrent imports queue on it
    let lock = trx.selectFrom('account').select('did').where('did', '=', did)
    if (db.dialect === 'postgres') lock = lock.forUpdate()
    await lock.executeTakeFirst()
    if (await hasRecords(trx, did)) throw repoNotEmpty()
    // the repository replaced (empty: it had no records), if any; relays need its rev and tree
    const before = await trx.selectFrom('repo_root').select('rev').where('did', '=', did).executeTakeFirst()

    // a new commit over the imported tree, signed with the account's own key; its rev follows both
    // the imported commit's and the replaced repository's, so revs only ever grow
    const after = before && before.rev > commit.rev ? before.rev : commit.rev
    const unsigned = { did, version: 3, data: commit.data, rev: TID.nextStr(after), prev: null }
    const commitBytes = Buffer.from(dagCbor.encode({ ...unsigned, sig: await keypair.sign(dagCbor.encode(unsigned)) }))
    const commitCidBytes = dagCborCid(hash('sha256', commitBytes, 'buffer'))
    const commitCid = keep(cidKey(commitCidBytes), commitBytes)
    const rev = unsigned.rev
    // what an empty repository (a fresh account's) held is replaced
    await trx.deleteFrom('repo_block').where('did', '=', did).execute()
    const blockValues: unknown[] = []
    for (const b of [...kept.values()].sort((x, y) => (x.cid < y.cid ? -1 : 1))) blockValues.push(did, b.cid, rev, b.bytes.length, b.bytes)
    await bulkInsert(trx, db.dialect, 'repo_block', ['did', 'cid', 'repo_rev', 'size', 'content'], blockValues)

    // leaves come in key order, so in uri order
    const now = new Date().toISOString()
    const prefix = `at://${did}/`
    const recordValues: unknown[] = []
    const refs: { blob: string; uri: string }[] = []
    for (const r of records) {
      const uri = prefix + r.path
      recordValues.push(uri, did, r.collection, r.rkey, r.cid, rev, now)
      for (const blob of r.blobs) refs.push({ blob, uri })
    }
    await bulkInsert(trx, db.dialect, 'record', ['uri', 'did', 'collection', 'rkey', 'cid', 'rev', 'indexed_at'], recordValues)
    refs.sort((a, b) => (a.blob < b.blob ? -1 : a.blob > b.blob ? 1 : a.uri < b.uri ? -1 : a.uri > b.uri ? 1 : 0))
    await bulkInsert(trx, db.dialect, 'record_blob', ['did', 'blob_cid', 'record_uri'], refs.flatMap((r) => [did, r.blob, r.uri]))
    // blobs uploaded before the import are referenced now (DECISIONS.md 15)
    const blobCids = [...new Set(refs.map((r) => r.blob))]
    for (let i = 0; i < blobCids.length; i += CHUNK) {
      await trx.updateTable('blob').set({ referenced: 1 }).where('did', '=', did).where('cid', 'in', blobCids.slice(i, i + CHUNK)).execute()
    }
    const root = { cid: commitCid, rev, indexed_at: now, block_count: kept.size, record_count: records.length }
    await trx
      .insertInto('repo_root')
      .values({ did, ...root })
      .onConflict((oc) => oc.column('did').doUpdateSet(root))
      .execute()
    await trx.updateTable('account').set({ migration_state: 'migrating-in' }).where('did', '=', did).execute()

    await deps.hooks?.afterRecordsIndexed?.(did)

    // DECISIONS.md 13: one #commit of creates within the lexicon's limits, else #sync
    const event =
      records.length <= MAX_COMMIT_OPS
        ? await appendCommitOrSync(trx, {
            did,
            rev,
            since: before?.rev ?? null,
            commit: parseCid(commitCid),
            blocks: blockMap(kept),
            ops: records.map((r) => ({ action: 'create' as const, path: r.path, cid: parseCid(r.cid) })),
            prevData: before ? await emptyTreeCid() : null,
          })
        : { type: 'sync', seq: await appendSyncEvent(trx, did, rev, parseCid(commitCid), commitBytes) }
    return { commit: { cid: commitCid, rev }, records: records.length, blocks: kept.size, event: event.type }
  })
}

/** a record's blob references: the byte scan, or a full decode where the scan defers */
function recordBlobs(key: string, bytes: Uint8Array): string[] {
  const fast = scanRecord(bytes)
  if (fast) return fast
  let value: unknown
  try {
    value = dagCbor.decode(bytes)
  } catch {
    throw xrpcError('InvalidCar', `Record ${key} is not DAG-CBOR`)
  }
  if (!value || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array || isCid(value)) {
    throw xrpcError('InvalidCar', `Record ${key} is not an object`)
  }
  return blobRefs(value)
}

/** the data CID of a repository without records */
const emptyTreeCid = async () => (await MST.create(new MemoryBlockstore())).getPointer()

function blockMap(blocks: Map<string, { cid: string; bytes: Uint8Array }>): BlockMap {
  const map = new BlockMap()
  for (const b of blocks.values()) map.set(parseCid(b.cid), b.bytes)
  return map
}

const repoNotEmpty = () => xrpcError('RepoNotEmpty', 'The account already has records; import only into an empty repository')

async function hasRecords(db: Pick<Db, 'selectFrom'>, did: string) {
  return !!(await db.selectFrom('record').select('uri').where('did', '=', did).limit(1).executeTakeFirst())
}

async function readCar(body: Readable): Promise<CarBlocks> {
  try {
    return await readCarBlocks(body as AsyncIterable<Uint8Array>)
  } catch (err) {
    if (err instanceof XRPCError) throw err
    // the body's own failures (its size limit) arrive wrapped
    const cause = (err as { cause?: unknown }).cause
    if (cause instanceof XRPCError) throw cause
    throw xrpcError('InvalidCar', `Malformed CAR: ${(err as Error)?.message ?? err}`)
  }
}

const isCid = (v: unknown) => !!v && typeof v === 'object' && (v as { asCID?: unknown }).asCID === v

function decodeCommit(bytes: Uint8Array): Commit {
  let c: any
  try {
    c = dagCbor.decode(bytes)
  } catch {
    throw xrpcError('InvalidRequest', 'The root block is not DAG-CBOR')
  }
  if (
    !c ||
    typeof c !== 'object' ||
    c.version !== 3 ||
    typeof c.did !== 'string' ||
    typeof c.rev !== 'string' ||
    !isCid(c.data) ||
    !(c.sig instanceof Uint8Array)
  ) {
    throw xrpcError('InvalidRequest', 'The root block is not a signed version 3 commit')
  }
  // a v3 commit carries `prev`, null or a link (@atproto/repo's commit schema)
  if (!(c.prev === null || isCid(c.prev))) throw xrpcError('InvalidRequest', 'The commit\'s prev is neither null nor a CID')
  if (!isValidTid(c.rev)) throw xrpcError('InvalidRequest', `The commit's rev is not a TID: ${c.rev}`)
  return c as Commit
}

/** every `atproto` key the DID's log has named: the local log, then the PLC directory's audit log */
async function previousKeys(deps: Deps, did: string): Promise<string[]> {
  const keys = new Set<string>()
  const local = await deps.db.selectFrom('plc_operation').select('operation').where('did', '=', did).execute()
  for (const row of local) addKeys(keys, JSON.parse(row.operation))
  if (deps.config.plcUrl) {
    try {
      const res = await fetch(`${deps.config.plcUrl}/${encodeURIComponent(did)}/log/audit`, {
        signal: AbortSignal.timeout(AUDIT_TIMEOUT_MS),
      })
      if (res.ok) {
        const entries = (await res.json()) as { operation?: unknown }[]
        if (Array.isArray(entries)) for (const e of entries) addKeys(keys, e?.operation)
      } else {
        await res.body?.cancel()
      }
    } catch (err) {
      deps.logger.warn({ did, err: String(err) }, 'importRepo: the PLC audit log could not be read')
    }
  }
  return [...keys]
}

function addKeys(keys: Set<string>, op: any) {
  if (!op || typeof op !== 'object') return
  const k = op.verificationMethods?.atproto ?? op.signingKey
  if (typeof k === 'string' && k.startsWith('did:key:')) keys.add(k)
}

