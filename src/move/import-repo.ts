// importRepo: the CAR is streamed and every block checked against its CID; the root commit must be
// version 3 for the caller's DID and signed by the reserved key or a key the DID's log has named,
// checked as soon as its block arrives; the tree is then re-signed with the account's key.
// Blocks, head, record index, record→blob references, counters, migration_state and the event
// land in ONE transaction: a failure leaves nothing, so a retry just works. Memory does not grow
// with the repository: the CAR is indexed compactly (car-blocks), the tree walked without being
// held (mst-walk) and the rows written a batch at a time by multi-row INSERTs.
import type { Readable } from 'node:stream'
import { hash } from 'node:crypto'
import * as dagCbor from '@ipld/dag-cbor'
import { XRPCError } from '@atproto/xrpc-server'
import { BlockMap, MemoryBlockstore, MST, verifyCommitSig, type Commit } from '@atproto/repo'
import { TID } from '@atproto/common'
import type { Keypair } from '@atproto/crypto'
import { parseCid } from '@atproto/lex-data'
import { isValidTid } from '@atproto/syntax'
import type { Config } from '../config.js'
import type { Logger } from '../logger.js'
import type { Db } from '../db/index.js'
import { bulkInsert } from '../db/bulk-insert.js'
import { lockingRead } from '../db/dialect.js'
import { xrpcError } from '../errors.js'
import { readCarBlocks, type BlockIndex, type CarBlocks, type CarHooks } from '../encoding/car-blocks.js'
import { cidKey, dagCborCid, keyToCidString } from '../encoding/cid-string.js'
import { appendCommitOrSync, appendSyncEvent, MAX_COMMIT_OPS } from '../repo/events.js'
import { MstError, mstItems } from '../repo/mst-walk.js'
import { blobRefs } from '../repo/prepare.js'
import { recordValueJson } from '../repo/record-json.js'
import { scanRecord } from '../repo/record-scan.js'
import { signingKeyFor } from '../repo/writer.js'

/** test-only fault injection: called inside the import transaction once the records are indexed */
export type ImportHooks = { afterRecordsIndexed?: (did: string) => void | Promise<void> }

// rows per multi-row INSERT round, and at most this many block bytes held for one
const BATCH_ROWS = 1000
const BATCH_BYTES = 8 * 1024 * 1024
const AUDIT_TIMEOUT_MS = 10_000

type Deps = { db: Db; config: Pick<Config, 'dataDir' | 'plcUrl'>; logger: Logger; hooks?: ImportHooks }

// one import at a time per process: each holds its whole CAR until it commits
let importing = false

export async function importRepo(deps: Deps, did: string, body: Readable) {
  if (importing) {
    drain(body)
    throw xrpcError('RateLimitExceeded', 'Another repository import is running on this server; try again in a minute')
  }
  importing = true
  try {
    return await importLocked(deps, did, body)
  } catch (err) {
    drain(body)
    throw err
  } finally {
    importing = false
  }
}

async function importLocked(deps: Deps, did: string, body: Readable) {
  const { db } = deps
  if (await hasRecords(db, did)) throw repoNotEmpty()
  const keypair = await signingKeyFor(db, did)
  // steps 3 and 4, on the root block as soon as it arrives: a forged CAR is refused before the
  // rest of it is held
  let commit: Commit | undefined
  const { blocks } = await readCar(body, {
    header: (roots) => {
      if (roots.length !== 1) throw xrpcError('InvalidCar', `The CAR must have exactly one root, not ${roots.length}`)
    },
    root: async (bytes) => {
      const c = decodeCommit(bytes)
      if (c.did !== did) throw xrpcError('InvalidRequest', `The commit is for ${c.did}, not ${did}`)
      await checkSignature(deps, did, c, keypair.did())
      commit = c
    },
    spoolDir: deps.config.dataDir,
  })
  try {
    return await importBlocks(deps, did, commit, blocks, keypair)
  } finally {
    blocks.close()
  }
}

async function importBlocks(deps: Deps, did: string, commit: Commit | undefined, blocks: BlockIndex, keypair: Keypair) {
  const { db } = deps
  if (!commit) throw xrpcError('InvalidCar', 'The CAR does not hold its root block')

  // the tree: every node and record must be in the CAR; only reachable blocks are kept. Checked
  // whole before the transaction, then walked again inside it, its rows written a batch at a time:
  // nothing in memory grows with the repository's size but the CAR's own index.
  const dataRoot = cidKey(commit.data.bytes)
  let recordCount = 0
  for (const row of importRows(blocks, dataRoot)) if (row.leaf) recordCount++

  return db.transact(async (trx) => {
    // the account row always exists (repo_root may not yet): concurrent imports queue on it
    await lockingRead(db.dialect, trx.selectFrom('account').select('did').where('did', '=', did)).executeTakeFirst()
    if (await hasRecords(trx, did)) throw repoNotEmpty()
    // the repository replaced (empty: it had no records), if any; relays need its rev and tree
    const before = await trx.selectFrom('repo_root').select('rev').where('did', '=', did).executeTakeFirst()

    // a new commit over the imported tree, signed with the account's own key; its rev follows both
    // the imported commit's and the replaced repository's, so revs only ever grow
    const after = before && before.rev > commit.rev ? before.rev : commit.rev
    const unsigned = { did, version: 3, data: commit.data, rev: TID.nextStr(after), prev: null }
    const commitBytes = Buffer.from(dagCbor.encode({ ...unsigned, sig: await keypair.sign(dagCbor.encode(unsigned)) }))
    const commitCid = keyToCidString(cidKey(dagCborCid(hash('sha256', commitBytes, 'buffer'))))
    const rev = unsigned.rev
    // what an empty repository (a fresh account's) held is replaced
    await trx.deleteFrom('repo_block').where('did', '=', did).execute()

    // one #commit of creates within the event lexicon's limits (its blocks and ops gathered on
    // the way), else #sync
    const small = recordCount <= MAX_COMMIT_OPS
    const eventBlocks = new BlockMap()
    const ops: { action: 'create'; path: string; cid: ReturnType<typeof parseCid> }[] = []

    const now = new Date().toISOString()
    const prefix = `at://${did}/`
    let blockRows: unknown[] = []
    let recordRows: unknown[] = []
    let refRows: unknown[] = []
    let batchBytes = 0
    const flush = async () => {
      await bulkInsert(trx, db.dialect, 'repo_block', ['did', 'cid', 'repo_rev', 'size', 'content'], blockRows)
      await bulkInsert(
        trx,
        db.dialect,
        'record',
        ['uri', 'did', 'collection', 'rkey', 'cid', 'rev', 'indexed_at', 'value_json'],
        recordRows,
      )
      await bulkInsert(trx, db.dialect, 'record_blob', ['did', 'blob_cid', 'record_uri'], refRows)
      blockRows = []
      recordRows = []
      refRows = []
      batchBytes = 0
    }
    let blockCount = 0
    // values several records share: their block is written once, counting one record
    const shared = new Map<string, number>()
    // leaves come in key order, so in uri order
    for (const row of importRows(blocks, dataRoot)) {
      const cid = keyToCidString(row.key)
      if (row.first) {
        blockRows.push(did, cid, rev, row.bytes.length, row.bytes)
        batchBytes += row.bytes.length
        blockCount++
        if (small) eventBlocks.set(parseCid(cid), row.bytes)
      }
      if (row.leaf) {
        const uri = prefix + row.leaf.path
        const slash = row.leaf.path.indexOf('/')
        const json = importedJson(row.bytes)
        recordRows.push(uri, did, row.leaf.path.slice(0, slash), row.leaf.path.slice(slash + 1), cid, rev, now, json)
        batchBytes += json?.length ?? 0
        for (const blob of row.leaf.blobs) refRows.push(did, blob, uri)
        if (!row.first) shared.set(cid, (shared.get(cid) ?? 0) + 1)
        if (small) ops.push({ action: 'create', path: row.leaf.path, cid: parseCid(cid) })
      }
      if (
        blockRows.length >= BATCH_ROWS * 5 ||
        recordRows.length >= BATCH_ROWS * 8 ||
        refRows.length >= BATCH_ROWS * 3 ||
        batchBytes >= BATCH_BYTES
      ) {
        await flush()
      }
    }
    blockRows.push(did, commitCid, rev, commitBytes.length, commitBytes)
    blockCount++
    await flush()
    if (small) eventBlocks.set(parseCid(commitCid), commitBytes)
    for (const [cid, more] of shared) {
      await trx
        .updateTable('repo_block')
        .set((eb) => ({ refs: eb('refs', '+', more) }))
        .where('did', '=', did)
        .where('cid', '=', cid)
        .execute()
    }

    // blobs uploaded before the import are referenced now
    await trx
      .updateTable('blob')
      .set({ referenced: 1 })
      .where('did', '=', did)
      .where('cid', 'in', trx.selectFrom('record_blob').select('blob_cid').where('did', '=', did))
      .execute()
    const root = { cid: commitCid, rev, indexed_at: now, block_count: blockCount, record_count: recordCount }
    await trx
      .insertInto('repo_root')
      .values({ did, ...root })
      .onConflict((oc) => oc.column('did').doUpdateSet(root))
      .execute()
    await trx.updateTable('account').set({ migration_state: 'migrating-in' }).where('did', '=', did).execute()

    await deps.hooks?.afterRecordsIndexed?.(did)

    const event = small
      ? await appendCommitOrSync(trx, {
          did,
          rev,
          since: before?.rev ?? null,
          commit: parseCid(commitCid),
          blocks: eventBlocks,
          ops,
          prevData: before ? await emptyTreeCid() : null,
        })
      : { type: 'sync', seq: await appendSyncEvent(trx, did, rev, parseCid(commitCid), commitBytes) }
    return { commit: { cid: commitCid, rev }, records: recordCount, blocks: blockCount, event: event.type }
  })
}

type ImportRow = { key: string; bytes: Buffer; first: boolean; leaf?: { path: string; blobs: string[] } }

/** the blocks the tree under `root` reaches (`first` the first time each is met) and its records */
function* importRows(blocks: BlockIndex, root: string): Generator<ImportRow> {
  const visited = new Uint8Array(blocks.size)
  const kept = new Uint8Array(blocks.size)
  const firstVisit = (key: string) => {
    const i = blocks.indexOf(key)
    return !visited[i] && !!(visited[i] = 1)
  }
  try {
    for (const item of mstItems(root, (key) => blocks.get(key), firstVisit)) {
      const key = item.node ?? item.leaf.cid
      const i = blocks.indexOf(key)
      if (i < 0) throw xrpcError('InvalidCar', `The CAR is missing block ${keyToCidString(key)} (record ${item.leaf!.key})`)
      const bytes = blocks.get(key)!
      const first = !kept[i]
      kept[i] = 1
      yield { key, bytes, first, leaf: item.leaf && { path: item.leaf.key, blobs: recordBlobs(item.leaf.key, bytes) } }
    }
  } catch (err) {
    if (err instanceof MstError) throw xrpcError('InvalidCar', `The repository tree is incomplete or malformed: ${err.message}`)
    throw err
  }
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

/**
 * the JSON text reads send for an imported record; null for one valid as DAG-CBOR but outside the
 * data model (a 64-bit integer), which reads then decode from its block as before
 */
function importedJson(bytes: Uint8Array): string | null {
  try {
    return recordValueJson(bytes)
  } catch {
    return null
  }
}

/** the data CID of a repository without records */
const emptyTreeCid = async () => (await MST.create(new MemoryBlockstore())).getPointer()

const repoNotEmpty = () => xrpcError('RepoNotEmpty', 'The account already has records; import only into an empty repository')

async function hasRecords(db: Pick<Db, 'selectFrom'>, did: string) {
  return !!(await db.selectFrom('record').select('uri').where('did', '=', did).limit(1).executeTakeFirst())
}

/** the commit must verify against the reserved key or a key the DID's log has named */
async function checkSignature(deps: Deps, did: string, commit: Commit, reserved: string) {
  // a malformed signature (all zeroes, wrong length) throws instead of failing
  const verifies = (key: string) => verifyCommitSig(commit, key).catch(() => false)
  if (await verifies(reserved)) return
  for (const k of await previousKeys(deps, did)) if (k !== reserved && (await verifies(k))) return
  throw xrpcError(
    'InvalidRequest',
    deps.config.plcUrl
      ? "The commit signature matches neither the reserved key nor any key of the DID's log"
      : "The commit is not signed by the reserved key, and without a PLC directory (PDS_DID_PLC_URL) this server cannot learn the DID's previous keys",
  )
}

/** discards the rest of a refused body, so the client reads the error instead of a reset */
function drain(body: Readable) {
  body.on('error', () => {})
  body.resume()
}

async function readCar(body: Readable, hooks: CarHooks): Promise<CarBlocks> {
  try {
    // the reader stops at the first bad block; the body is then drained, not destroyed
    return await readCarBlocks(body.iterator({ destroyOnReturn: false }), hooks)
  } catch (err) {
    drain(body)
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
  if (!(c.prev === null || isCid(c.prev))) throw xrpcError('InvalidRequest', "The commit's prev is neither null nor a CID")
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
