// A validating relay's view of one server's firehose (Sync 1.1), built on @atproto/repo alone:
// every #commit must be signed by the key the DID document names, follow the previous rev of its
// repository, and invert, using only its own blocks, onto the tree the previous commit named.
// A #sync resets a repository to the commit it carries. Every failure is recorded, none skipped.
import { MemoryBlockstore, MST, readCarWithRoot, verifyCommitSig } from '@atproto/repo'
import * as dagCbor from '@ipld/dag-cbor'
import type { Frame } from './firehose-client.js'

const MAX_OPS = 200
const MAX_BLOCK_BYTES = 2_000_000

type RepoState = { rev: string; data: string }
export type Verified = { seq: number; t: string; did: string; rev?: string; ops?: number }

export class SyncVerifier {
  readonly failures: string[] = []
  readonly verified: Verified[] = []
  private state = new Map<string, RepoState>()
  private keys = new Map<string, string>()
  private lastSeq = 0
  private queue: Promise<void> = Promise.resolve()
  private taken = 0

  /** `keyOf` answers the `did:key` a DID document names now for signing */
  constructor(private keyOf: (did: string) => Promise<string>) {}

  /** verifies, in order, the frames received since the last call */
  feed(frames: Frame[]): Promise<void> {
    const fresh = frames.slice(this.taken)
    this.taken = frames.length
    for (const f of fresh) this.queue = this.queue.then(() => this.one(f))
    return this.queue
  }

  /** the state a relay holds for `did` after the events so far */
  repo(did: string): RepoState | undefined {
    return this.state.get(did)
  }

  /** events verified for `did` */
  eventsOf(did: string) {
    return this.verified.filter((v) => v.did === did)
  }

  private async one(f: Frame) {
    const b = f.body
    const where = `seq ${b?.seq} ${f.t}`
    try {
      if (f.op !== 1) throw new Error(`error frame: ${JSON.stringify(b)}`)
      if (typeof b.seq !== 'number' || b.seq <= this.lastSeq) throw new Error(`seq ${b.seq} does not follow ${this.lastSeq}`)
      this.lastSeq = b.seq
      if (f.t === '#commit') await this.commit(b)
      else if (f.t === '#sync') await this.sync(b)
      else if (f.t === '#identity') this.keys.delete(b.did)
      else if (f.t !== '#account' && f.t !== '#tombstone') throw new Error(`unknown event type ${f.t}`)
      this.verified.push({ seq: b.seq, t: f.t, did: b.repo ?? b.did, rev: b.rev, ops: b.ops?.length })
    } catch (err) {
      this.failures.push(`${where}: ${(err as Error).message}`)
    }
  }

  private async key(did: string) {
    let k = this.keys.get(did)
    if (!k) this.keys.set(did, (k = await this.keyOf(did)))
    return k
  }

  /** the commit a CAR's root names, checked against its DID, rev and the DID's current key */
  private async signedCommit(did: string, rev: string, car: Uint8Array, cid?: { toString(): string }) {
    const { root, blocks } = await readCarWithRoot(car)
    if (cid && root.toString() !== cid.toString()) throw new Error(`CAR root ${root} is not the commit ${cid}`)
    const bytes = blocks.get(root)
    if (!bytes) throw new Error('the commit block is missing')
    const commit = dagCbor.decode<any>(bytes)
    if (commit.version !== 3) throw new Error(`commit version ${commit.version}`)
    if (commit.did !== did) throw new Error(`commit of ${commit.did}, event of ${did}`)
    if (commit.rev !== rev) throw new Error(`commit rev ${commit.rev}, event rev ${rev}`)
    if (!(await verifyCommitSig(commit, await this.key(did)))) throw new Error(`signature does not match ${did}'s current key`)
    return { commit, blocks }
  }

  private async commit(ev: any) {
    const did: string = ev.repo
    if (ev.tooBig !== false || ev.rebase !== false) throw new Error('tooBig or rebase set')
    if (ev.ops.length > MAX_OPS) throw new Error(`${ev.ops.length} ops`)
    if (ev.blocks.length > MAX_BLOCK_BYTES) throw new Error(`${ev.blocks.length} bytes of blocks`)
    const { commit, blocks } = await this.signedCommit(did, ev.rev, ev.blocks, ev.commit)
    const prev = this.state.get(did)
    if (prev) {
      if (ev.since !== prev.rev) throw new Error(`since ${ev.since}, previous rev ${prev.rev}`)
      if (!(ev.rev > prev.rev)) throw new Error(`rev ${ev.rev} does not follow ${prev.rev}`)
      if (!ev.prevData || ev.prevData.toString() !== prev.data) throw new Error(`prevData ${ev.prevData}, previous data ${prev.data}`)
    } else if (ev.since !== null) {
      throw new Error(`since ${ev.since} for a repository never seen`)
    }

    // the ops against the new tree, then undone on it: only the event's blocks are at hand
    const store = new MemoryBlockstore(blocks)
    let tree = MST.load(store, commit.data)
    const paths = new Set<string>()
    for (const op of ev.ops) {
      if (paths.has(op.path)) throw new Error(`two ops on ${op.path}`)
      paths.add(op.path)
      const now = await tree.get(op.path)
      if (op.action === 'create') {
        if (!op.cid || op.prev) throw new Error(`malformed create ${op.path}`)
        if (now?.toString() !== op.cid.toString()) throw new Error(`create ${op.path}: tree has ${now}`)
        tree = await tree.delete(op.path)
      } else if (op.action === 'update') {
        if (!op.cid || !op.prev) throw new Error(`malformed update ${op.path}`)
        if (op.cid.toString() === op.prev.toString()) throw new Error(`update ${op.path} changes nothing`)
        if (now?.toString() !== op.cid.toString()) throw new Error(`update ${op.path}: tree has ${now}`)
        tree = await tree.update(op.path, op.prev)
      } else if (op.action === 'delete') {
        if (op.cid !== null || !op.prev) throw new Error(`malformed delete ${op.path}`)
        if (now !== null) throw new Error(`delete ${op.path}: tree still has ${now}`)
        tree = await tree.add(op.path, op.prev)
      } else {
        throw new Error(`unknown action ${op.action}`)
      }
    }
    const inverted = (await tree.getPointer()).toString()
    const expected = ev.prevData
      ? ev.prevData.toString()
      : (await MST.create(new MemoryBlockstore()).then((t) => t.getPointer())).toString()
    if (inverted !== expected) throw new Error(`inverted tree ${inverted}, prevData ${expected}`)
    this.state.set(did, { rev: ev.rev, data: commit.data.toString() })
  }

  private async sync(ev: any) {
    const { commit } = await this.signedCommit(ev.did, ev.rev, ev.blocks)
    this.state.set(ev.did, { rev: ev.rev, data: commit.data.toString() })
  }
}
