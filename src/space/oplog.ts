// The operation log as listRepoOps serves it. Each committed write batch has one rev and each op
// an index within it; a page is read strictly after a position, in (rev, index) order. A full page
// carries a cursor (the last op's position) and no commit; a shorter page has reached the head and
// carries the current signed commit instead, so a syncer knows where it stands.
import { isValidTid } from '@atproto/syntax'
import { spaceError } from './errors.js'

export const OPS_LIMIT_DEFAULT = 100
export const OPS_LIMIT_MAX = 1000

/** one op on the wire: `cid` null for a delete, `prev` null for a create, both for an update */
export type OpEntry = { rev: string; collection: string; rkey: string; cid: string | null; prev: string | null; value?: unknown }

/** where a page starts: after `index` within `rev`, or after the whole of `rev` when `index` is absent */
export type OpPosition = { rev: string; index?: number }

/** an op as stored, with the record's current state when it still exists */
export type StoredOp = {
  rev: string
  index: number
  collection: string
  rkey: string
  cid: string | null
  prev: string | null
  current?: { cid: string; value: unknown }
}

export type OpsPage<C> = { ops: OpEntry[]; cursor: string; commit?: undefined } | { ops: OpEntry[]; commit: C; cursor?: undefined }

export const encodeOpsCursor = (rev: string, index: number) => `${rev}/${index}`

/** the position a cursor names; MalformedCursor otherwise */
export function decodeOpsCursor(cursor: string): Required<OpPosition> {
  const m = /^([^/]+)\/(0|[1-9][0-9]{0,8})$/.exec(cursor)
  if (!m || !isValidTid(m[1])) throw spaceError('MalformedCursor', 'cursor must be one a previous page returned ({rev}/{index})')
  return { rev: m[1], index: Number(m[2]) }
}

/** where to read from: the cursor wins over `since` (exclusive); neither means the whole retained log */
export function opsStart(params: { since?: string; cursor?: string }): OpPosition | undefined {
  if (params.cursor !== undefined) return decodeOpsCursor(params.cursor)
  if (params.since !== undefined) {
    if (!isValidTid(params.since)) throw spaceError('InvalidRequest', 'since must be a rev (TID)')
    return { rev: params.since }
  }
  return undefined
}

/** whether `op` comes after `start` in log order */
export function isAfter(op: { rev: string; index: number }, start: OpPosition | undefined): boolean {
  if (!start) return true
  if (op.rev !== start.rev) return op.rev > start.rev
  return start.index !== undefined && op.index > start.index
}

/**
 * The page for `rows` (the ops after the start, in log order, at most `limit` of them). A value
 * is inlined only for a create or update whose CID is still the record's, unless excluded.
 * `headCommit` signs the current commit and is called only for a page that reached the head.
 */
export async function shapeOpsPage<C>(
  rows: StoredOp[],
  limit: number,
  opts: { excludeValues?: boolean; headCommit: () => Promise<C> },
): Promise<OpsPage<C>> {
  if (rows.length > limit) throw new RangeError('more rows than the page limit')
  const ops = rows.map((r): OpEntry => {
    const e: OpEntry = { rev: r.rev, collection: r.collection, rkey: r.rkey, cid: r.cid, prev: r.prev }
    if (!opts.excludeValues && r.cid !== null && r.current?.cid === r.cid) e.value = r.current.value
    return e
  })
  if (rows.length === limit && limit > 0) {
    const last = rows[rows.length - 1]
    return { ops, cursor: encodeOpsCursor(last.rev, last.index) }
  }
  return { ops, commit: await opts.headCommit() }
}
