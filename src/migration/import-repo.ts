// importRepo (part 2 §4.9 with DECISIONS.md 11 to 13): the CAR is streamed and every block checked
// against its CID; the root commit must be version 3 for the caller's DID and signed by the
// reserved key or a key the DID's log has named; the tree is then re-signed with the account's
// key. Blocks, head, record index, record→blob references, counters, migration_state and the
// event land in ONE transaction (DECISIONS.md 12): a failure leaves nothing, so a retry just works.
import type { Readable } from 'node:stream'
import * as dagCbor from '@ipld/dag-cbor'
import { XRPCError } from '@atproto/xrpc-server'
import { BlockMap, MemoryBlockstore, MST, readCarStream, Repo, verifyCommitSig, type Commit } from '@atproto/repo'
import type { Cid } from '@atproto/lex-data'
import type { Services } from '../context.js'
import type { Db } from '../db/index.js'
import { xrpcError } from '../errors.js'
import { appendCommitOrSync, type CommitOp } from '../repo/events.js'
import { blobRefs } from '../repo/prepare.js'
import { SqlRepoStorage } from '../repo/storage.js'
import { signingKeyFor } from '../repo/writer.js'

/** test-only fault injection: called inside the import transaction once the records are indexed */
export type ImportHooks = { afterRecordsIndexed?: (did: string) => void | Promise<void> }

const CHUNK = 200
const AUDIT_TIMEOUT_MS = 10_000

type Deps = Pick<Services, 'db' | 'config' | 'logger'> & { hooks?: ImportHooks }

export async function importRepo(deps: Deps, did: string, body: Readable) {
  const { db } = deps
  if (await hasRecords(db, did)) throw repoNotEmpty()
  const { root, blocks } = await readCar(body)

  // step 3: the root is a version-3 commit of the caller's DID
  const rootBytes = blocks.get(root)
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
  const mem = new MemoryBlockstore(blocks)
  const mst = MST.load(mem, commit.data)
  let leaves: { key: string; value: Cid }[]
  let reachable: Cid[]
  try {
    leaves = (await mst.leaves()).map((l) => ({ key: l.key, value: l.value as Cid }))
    reachable = (await mst.allCids()).toList()
  } catch (err) {
    throw xrpcError('InvalidCar', `The repository tree is incomplete: ${(err as Error).message}`)
  }
  const kept = new BlockMap()
  for (const cid of reachable) {
    const bytes = blocks.get(cid)
    if (!bytes) throw xrpcError('InvalidCar', `The CAR is missing block ${cid.toString()}`)
    kept.set(cid, bytes)
  }
  const records = leaves.map((l) => {
    const slash = l.key.indexOf('/')
    const collection = l.key.slice(0, slash)
    const rkey = l.key.slice(slash + 1)
    let value: unknown
    try {
      value = dagCbor.decode(kept.get(l.value)!)
    } catch {
      throw xrpcError('InvalidCar', `Record ${l.key} is not DAG-CBOR`)
    }
    return { uri: `at://${did}/${l.key}`, path: l.key, collection, rkey, cid: l.value, blobs: blobRefs(value) }
  })

  // DECISIONS.md 11: a new commit over the imported tree, signed with the account's own key
  const repo = await Repo.load(mem, root)
  const resigned = await repo.formatCommit([], keypair)
  kept.addMap(resigned.newBlocks)

  return db.transaction().execute(async (trx) => {
    // the account row always exists (repo_root may not yet): concurrent imports queue on it
    let lock = trx.selectFrom('account').select('did').where('did', '=', did)
    if (db.dialect === 'postgres') lock = lock.forUpdate()
    await lock.executeTakeFirst()
    if (await hasRecords(trx, did)) throw repoNotEmpty()
    // what an empty repository (a fresh account's) held is replaced
    await trx.deleteFrom('repo_block').where('did', '=', did).execute()
    const storage = new SqlRepoStorage(trx, did)
    const blockCount = await storage.insertMany(kept, resigned.rev)
    await storage.updateRoot(resigned.cid, resigned.rev)

    const now = new Date().toISOString()
    for (let i = 0; i < records.length; i += CHUNK) {
      await trx
        .insertInto('record')
        .values(
          records.slice(i, i + CHUNK).map((r) => ({
            uri: r.uri,
            did,
            collection: r.collection,
            rkey: r.rkey,
            cid: r.cid.toString(),
            rev: resigned.rev,
            indexed_at: now,
          })),
        )
        .execute()
    }
    const refs = records.flatMap((r) => r.blobs.map((b) => ({ did, blob_cid: b, record_uri: r.uri })))
    for (let i = 0; i < refs.length; i += CHUNK) {
      await trx.insertInto('record_blob').values(refs.slice(i, i + CHUNK)).execute()
    }
    // blobs uploaded before the import are referenced now (DECISIONS.md 15)
    const blobCids = [...new Set(refs.map((r) => r.blob_cid))]
    for (let i = 0; i < blobCids.length; i += CHUNK) {
      await trx.updateTable('blob').set({ referenced: 1 }).where('did', '=', did).where('cid', 'in', blobCids.slice(i, i + CHUNK)).execute()
    }
    await trx
      .updateTable('repo_root')
      .set({ block_count: blockCount, record_count: records.length })
      .where('did', '=', did)
      .execute()
    await trx.updateTable('account').set({ migration_state: 'migrating-in' }).where('did', '=', did).execute()

    await deps.hooks?.afterRecordsIndexed?.(did)

    // DECISIONS.md 13: one #commit of creates within the lexicon's limits, else #sync
    const ops: CommitOp[] = records.map((r) => ({ action: 'create', path: r.path, cid: r.cid }))
    const event = await appendCommitOrSync(trx, {
      did,
      rev: resigned.rev,
      since: null,
      commit: resigned.cid,
      blocks: kept,
      ops,
      prevData: null,
    })
    return { commit: { cid: resigned.cid.toString(), rev: resigned.rev }, records: records.length, blocks: blockCount, event: event.type }
  })
}

const repoNotEmpty = () => xrpcError('RepoNotEmpty', 'The account already has records; import only into an empty repository')

async function hasRecords(db: Pick<Db, 'selectFrom'>, did: string) {
  return !!(await db.selectFrom('record').select('uri').where('did', '=', did).limit(1).executeTakeFirst())
}

async function readCar(body: Readable): Promise<{ root: Cid; blocks: BlockMap }> {
  try {
    const car = await readCarStream(body as AsyncIterable<Uint8Array>)
    if (car.roots.length !== 1) {
      await car.blocks.dump()
      throw xrpcError('InvalidCar', `The CAR must have exactly one root, not ${car.roots.length}`)
    }
    const blocks = new BlockMap()
    for await (const b of car.blocks) blocks.set(b.cid, b.bytes)
    return { root: car.roots[0], blocks }
  } catch (err) {
    if (err instanceof XRPCError) throw err
    const cause = (err as { cause?: unknown }).cause
    if (cause instanceof XRPCError) throw cause
    throw xrpcError('InvalidCar', `Malformed CAR: ${(err as Error)?.message ?? err}`)
  }
}

function decodeCommit(bytes: Uint8Array): Commit {
  let c: any
  try {
    c = dagCbor.decode(bytes)
  } catch {
    throw xrpcError('InvalidRequest', 'The root block is not DAG-CBOR')
  }
  const isCid = (v: unknown) => !!v && typeof v === 'object' && (v as { asCID?: unknown }).asCID === v
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

