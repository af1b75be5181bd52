// The JSON text a record's index row keeps (src/repo/record-json.ts) against decoding the block
// into objects and serializing those, the way getRecord answered before: the same text for any
// record, including the shapes the direct pass hands over to that slower road.
import * as dagCbor from '@ipld/dag-cbor'
import { lexToJson } from '@atproto/lexicon'
import { decode as decodeCbor, encode as encodeCbor, type TagDecoder } from 'cborg'
import fc from 'fast-check'
import { CID } from 'multiformats/cid'
import { sha256 } from 'multiformats/hashes/sha2'
import { describe, expect, it } from 'vitest'
import { directJson, recordValueJson } from '../src/repo/record-json.js'

const tags: TagDecoder[] = []
tags[42] = (bytes: Uint8Array) => ({ $link: CID.decode(bytes.subarray(1)).toString() })
const slowRoad = (bytes: Uint8Array) => JSON.stringify(lexToJson(decodeCbor(bytes, { tags }) as never))

const cid = (codec: number, seed: number) => CID.createV1(codec, sha256.digest(new Uint8Array([seed, seed >> 8])) as never)

// values of the data model, keys a JS object keeps in order and ones it reorders ("1", "10")
const key = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('$type', 'text', '1', '10', '0', 'a1', 'é', '\u0000', '"'))
const value = fc.letrec((tie) => ({
  any: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
    fc.constantFrom(0, -1, 23, 24, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER),
    fc.string({ unit: 'grapheme', maxLength: 20 }),
    fc.string({ unit: 'binary', maxLength: 8 }),
    fc.boolean(),
    fc.constant(null),
    fc.uint8Array({ maxLength: 20 }),
    fc.integer({ min: 0, max: 65535 }).map((s) => cid(0x71, s)),
    fc.integer({ min: 0, max: 65535 }).map((s) => cid(0x55, s)),
    fc.array(tie('any'), { maxLength: 4 }),
    tie('map'),
  ),
  map: fc.dictionary(key, tie('any'), { maxKeys: 5 }),
}))

describe('record JSON text', () => {
  it('is the text decoding and serializing gives, for any record', () => {
    fc.assert(
      fc.property(value.map, (record) => {
        const bytes = dagCbor.encode(record)
        expect(recordValueJson(bytes)).toBe(slowRoad(bytes))
      }),
      { numRuns: 2000 },
    )
  })

  it('writes posts with links, blobs and bytes directly', () => {
    const post = {
      $type: 'app.bsky.feed.post',
      text: 'héllo "quoted" \\ \n ☃ 😀',
      createdAt: '2026-01-01T00:00:00.000Z',
      langs: ['en'],
      reply: { root: { uri: 'at://did:plc:x/app.bsky.feed.post/1', cid: cid(0x71, 1).toString() } },
      embed: {
        $type: 'app.bsky.embed.images',
        images: [{ alt: '', image: { $type: 'blob', ref: cid(0x55, 2), mimeType: 'image/png', size: 10 } }],
      },
      bytes: new Uint8Array([1, 2, 3, 4]),
      n: -12,
    }
    const bytes = dagCbor.encode(post)
    const json = directJson(bytes)
    expect(json).toBe(slowRoad(bytes))
    expect(JSON.parse(json!).embed.images[0].image.ref).toEqual({ $link: cid(0x55, 2).toString() })
    expect(JSON.parse(json!).bytes).toEqual({ $bytes: 'AQIDBA' })
  })

  it('gives the same text for shapes the direct pass leaves to full decoding', () => {
    const cases = [
      // keys out of DAG-CBOR order, and a key a JS object moves to the front
      Uint8Array.from([0xa2, 0x61, 0x62, 0x01, 0x61, 0x61, 0x02]),
      dagCbor.encode({ z: 1, 7: 'seven' }),
      // a float, a 64-bit integer, a CIDv0 link
      encodeCbor({ f: 1.5 }),
      encodeCbor({ big: 2 ** 40 }),
      dagCbor.encode({ n: Number.MAX_SAFE_INTEGER }),
      dagCbor.encode({ old: CID.parse('QmdfTbBqBPQ7VNxZEYEj14VmRuZBkqFbiwReogJgS1zR1n') }),
      // invalid UTF-8 in a string
      Uint8Array.from([0xa1, 0x61, 0x61, 0x62, 0xc3, 0x28]),
    ]
    for (const bytes of cases) {
      expect(directJson(bytes)).toBeUndefined()
      expect(recordValueJson(bytes)).toBe(slowRoad(bytes))
    }
  })

  it('refuses bytes that are not CBOR', () => {
    expect(() => recordValueJson(Uint8Array.from([0xa1, 0x61]))).toThrow()
  })
})
