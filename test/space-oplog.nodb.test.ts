// The listRepoOps page: cursor format, where a page starts, and what a full and a partial page carry.
import { describe, expect, it } from 'vitest'
import { type StoredOp, decodeOpsCursor, encodeOpsCursor, isAfter, opsStart, shapeOpsPage } from '../src/space/oplog.js'
import { answerOf } from './space-helpers.js'

const REV1 = '3kd2bxmiyd42b'
const REV2 = '3kd2bxmiyd42c'
const CID_A = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'
const CID_B = 'bafyreib2rxk3rh6kzwq6pyjfcf5j6gmqcsb3x7snqbsdpgrhxzg5oqdtpa'

const op = (rev: string, index: number, rest: Partial<StoredOp> = {}): StoredOp => ({
  rev,
  index,
  collection: 'com.example.forum.post',
  rkey: `k${index}`,
  cid: CID_A,
  prev: null,
  ...rest,
})

describe('oplog cursors', () => {
  it('round-trips {rev}/{index}', () => {
    expect(encodeOpsCursor(REV1, 3)).toBe(`${REV1}/3`)
    expect(decodeOpsCursor(`${REV1}/3`)).toEqual({ rev: REV1, index: 3 })
    expect(decodeOpsCursor(`${REV1}/0`)).toEqual({ rev: REV1, index: 0 })
  })

  it.each([
    ['garbage'],
    [''],
    [`${REV1}`],
    [`${REV1}/`],
    [`${REV1}/-1`],
    [`${REV1}/01`],
    [`${REV1}/1.5`],
    ['notatid/1'],
    [`${REV1}/1/2`],
    [`${REV1}/9999999999`],
  ])('refuses %j with MalformedCursor', async (cursor) => {
    expect(await answerOf(() => decodeOpsCursor(cursor))).toEqual({ status: 400, error: 'MalformedCursor' })
  })

  it('starts after the cursor, which wins over since', () => {
    expect(opsStart({ since: REV1, cursor: `${REV2}/4` })).toEqual({ rev: REV2, index: 4 })
    expect(opsStart({ since: REV1 })).toEqual({ rev: REV1 })
    expect(opsStart({})).toBeUndefined()
  })

  it('refuses a since that is not a rev', async () => {
    expect(await answerOf(() => opsStart({ since: 'yesterday' }))).toEqual({ status: 400, error: 'InvalidRequest' })
  })

  it('orders by rev, then index; since excludes its whole rev', () => {
    expect(isAfter({ rev: REV1, index: 0 }, undefined)).toBe(true)
    expect(isAfter({ rev: REV1, index: 5 }, { rev: REV1 })).toBe(false)
    expect(isAfter({ rev: REV2, index: 0 }, { rev: REV1 })).toBe(true)
    expect(isAfter({ rev: REV1, index: 2 }, { rev: REV1, index: 1 })).toBe(true)
    expect(isAfter({ rev: REV1, index: 1 }, { rev: REV1, index: 1 })).toBe(false)
    expect(isAfter({ rev: REV1, index: 9 }, { rev: REV2, index: 0 })).toBe(false)
  })
})

describe('oplog pages', () => {
  const head = async () => ({ rev: REV2 })

  it('gives a full page a cursor at its last op and no commit', async () => {
    const page = await shapeOpsPage([op(REV1, 0), op(REV1, 1)], 2, { headCommit: head })
    expect(page.cursor).toBe(`${REV1}/1`)
    expect(page.commit).toBeUndefined()
  })

  it('gives a page short of the limit the head commit and no cursor', async () => {
    const page = await shapeOpsPage([op(REV1, 0)], 2, { headCommit: head })
    expect(page).toMatchObject({ commit: { rev: REV2 } })
    expect(page.cursor).toBeUndefined()
    expect(await shapeOpsPage([], 100, { headCommit: head })).toEqual({ ops: [], commit: { rev: REV2 } })
  })

  it('signs the head commit only for a page that reached the head', async () => {
    let signed = 0
    await shapeOpsPage([op(REV1, 0)], 1, { headCommit: async () => ++signed })
    expect(signed).toBe(0)
  })

  it('inlines a value only while its CID is still the record’s', async () => {
    const rows = [
      op(REV1, 0, { rkey: 'a', cid: CID_A, current: { cid: CID_B, value: { text: 'new' } } }), // superseded create
      op(REV2, 0, { rkey: 'a', cid: CID_B, prev: CID_A, current: { cid: CID_B, value: { text: 'new' } } }), // current update
      op(REV2, 1, { rkey: 'b', cid: null, prev: CID_A }), // delete
    ]
    const { ops } = await shapeOpsPage(rows, 10, { headCommit: head })
    expect(ops).toEqual([
      { rev: REV1, collection: 'com.example.forum.post', rkey: 'a', cid: CID_A, prev: null },
      { rev: REV2, collection: 'com.example.forum.post', rkey: 'a', cid: CID_B, prev: CID_A, value: { text: 'new' } },
      { rev: REV2, collection: 'com.example.forum.post', rkey: 'b', cid: null, prev: CID_A },
    ])
    const bare = await shapeOpsPage(rows, 10, { excludeValues: true, headCommit: head })
    expect(bare.ops.every((o) => !('value' in o))).toBe(true)
  })
})
