// The firehose bodies of repository changes (com.atproto.sync.subscribeRepos #commit and #sync,
// without seq and time), appended in the transaction of the change they describe.
import type { BlockMap } from '@atproto/repo'
import type { Cid } from '@atproto/lex-data'
import { appendEvent } from '../sequencer/index.js'
import { carChunks } from '../encoding/car.js'
import { CborWriter } from '../encoding/cbor-writer.js'
import { blockEntries } from '../patches/repo.js'
import type { Writer } from '../db/store.js'

export type CommitOp = { action: 'create' | 'update' | 'delete'; path: string; cid: Cid | null; prev?: Cid }

export type CommitEvent = {
  did: string
  rev: string
  since: string | null
  commit: Cid
  /** the commit's new blocks plus the MST proof blocks a consumer needs to check the ops */
  blocks: BlockMap
  ops: CommitOp[]
  /** MST root before the commit (sync 1.1); null for a repository's first commit */
  prevData: Cid | null
}

// the subscribeRepos lexicon's limits on one #commit; a larger import emits #sync instead
export const MAX_COMMIT_OPS = 200
export const MAX_COMMIT_BLOCK_BYTES = 2_000_000

/**
 * Appends `#commit` for a change within the lexicon's limits, else `#sync` for the new commit
 * (consumers then fetch the repository). Returns the event's seq and which kind it was.
 */
export async function appendCommitOrSync(db: Writer, ev: CommitEvent): Promise<{ seq: number; type: 'commit' | 'sync' }> {
  const car = ev.ops.length <= MAX_COMMIT_OPS ? carFile(ev.commit, ev.blocks) : undefined
  if (!car || car.length > MAX_COMMIT_BLOCK_BYTES) {
    const commitBytes = ev.blocks.get(ev.commit)
    if (!commitBytes) throw new Error('commit block missing from the event blocks')
    return { seq: await appendSyncEvent(db, ev.did, ev.rev, ev.commit, commitBytes), type: 'sync' }
  }
  return { seq: await appendEvent(db, 'commit', ev.did, commitBody(ev, car)), type: 'commit' }
}

/** `#sync`: the repository's current commit, as a CAR holding only the commit block */
export async function appendSyncEvent(db: Writer, did: string, rev: string, commit: Cid, commitBytes: Uint8Array) {
  const car = carOf(commit.toString(), [{ cid: commit.toString(), content: commitBytes }])
  return appendEvent(db, 'sync', did, { did, rev, blocks: car })
}

/** the CAR @atproto/repo's blocksToCarFile makes of `blocks`, built in one synchronous pass */
export function carFile(root: Cid, blocks: BlockMap): Uint8Array {
  const rows = [...blockEntries(blocks)].map(([cid, content]) => ({ cid, content }))
  return carOf(root.toString(), rows)
}

/**
 * The #commit body's DAG-CBOR, byte for byte what @ipld/dag-cbor makes of
 * `{repo, rev, since, commit, blocks, ops, blobs: [], rebase: false, tooBig: false, prevData?}`,
 * written directly: the generic encoder took longer than the rest of the event.
 */
export function commitBody(ev: CommitEvent, car: Uint8Array): Uint8Array {
  const w = new CborWriter()
  w.head(5, ev.prevData ? 10 : 9)
  w.text('ops')
  w.head(4, ev.ops.length)
  for (const op of ev.ops) {
    w.head(5, op.prev ? 4 : 3)
    w.text('cid')
    w.cidOrNull(op.cid)
    w.text('path')
    w.text(op.path)
    if (op.prev) {
      w.text('prev')
      w.cidOrNull(op.prev)
    }
    w.text('action')
    w.text(op.action)
  }
  w.text('rev')
  w.text(ev.rev)
  w.text('repo')
  w.text(ev.did)
  w.text('blobs')
  w.head(4, 0)
  w.text('since')
  if (ev.since === null) w.byte(0xf6)
  else w.text(ev.since)
  w.text('blocks')
  w.bytes(car)
  w.text('commit')
  w.cidOrNull(ev.commit)
  w.text('rebase')
  w.byte(0xf4)
  w.text('tooBig')
  w.byte(0xf4)
  if (ev.prevData) {
    w.text('prevData')
    w.cidOrNull(ev.prevData)
  }
  return w.finish()
}

// the event body is DAG-CBOR: bytes as a plain Uint8Array, as blocksToCarFile gave them
const bytesOf = (b: Buffer) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength)

/** a small CAR in one piece */
const carOf = (root: string, rows: Iterable<{ cid: string; content: Uint8Array }>) => bytesOf(Buffer.concat([...carChunks(root, rows)]))
