// The LtHash commit digest: the published vectors, and the multiset laws a syncer relies on.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { LTHASH_BYTES, LtHash, recordElement } from '../src/space/lthash.js'
import { hex } from './space-helpers.js'

const CID = 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm'

describe('LtHash', () => {
  it('digests the empty state to the published vector', () => {
    expect(hex(new LtHash().digest())).toBe('e5a00aa9991ac8a5ee3109844d84a55583bd20572ad3ffcd42792f3c36b183ad')
  })

  it('digests "one" and "two" to the published vector', () => {
    expect(hex(new LtHash().add('one').add('two').digest())).toBe('ae05cb6d224379d9710c290c8529945c5b0e0fde9ead30b9699057ce701c63e7')
  })

  it('names a record by collection, rkey and CID string', () => {
    expect(recordElement('com.example.post', '3kd2bxmiyd42b', CID)).toBe(`com.example.post/3kd2bxmiyd42b/${CID}`)
    const a = new LtHash().addRecord('com.example.post', '3kd2bxmiyd42b', CID)
    const b = new LtHash().add(`com.example.post/3kd2bxmiyd42b/${CID}`)
    expect(hex(a.digest())).toBe(hex(b.digest()))
  })

  it('keeps a 2048-byte state of little-endian lanes that round-trips', () => {
    const h = new LtHash().add('one')
    const state = h.state()
    expect(state.length).toBe(LTHASH_BYTES)
    expect(hex(new LtHash(state).digest())).toBe(hex(h.digest()))
    // one lane set to 1 sits in the low byte
    const one = new Uint8Array(LTHASH_BYTES)
    one[0] = 1
    expect(new LtHash(one).state()[0]).toBe(1)
    expect(() => new LtHash(new Uint8Array(10))).toThrow(RangeError)
  })

  it('counts an element added twice twice', () => {
    const once = new LtHash().add('x')
    const twice = new LtHash().add('x').add('x')
    expect(hex(twice.digest())).not.toBe(hex(once.digest()))
    expect(hex(twice.remove('x').digest())).toBe(hex(once.digest()))
  })

  it('returns to empty when every record is deleted, wrapping lanes mod 2^16', () => {
    const h = new LtHash().remove('never added')
    expect(h.isEmpty()).toBe(false)
    h.add('never added')
    expect(h.isEmpty()).toBe(true)
    expect(hex(h.digest())).toBe('e5a00aa9991ac8a5ee3109844d84a55583bd20572ad3ffcd42792f3c36b183ad')
  })

  it('does not depend on the order elements are added', () => {
    fc.assert(
      fc.property(
        fc
          .array(fc.string(), { maxLength: 12 })
          .chain((items) => fc.tuple(fc.constant(items), fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length }))),
        ([items, shuffled]) => {
          const x = new LtHash()
          const y = new LtHash()
          items.forEach((i) => x.add(i))
          shuffled.forEach((i) => y.add(i))
          expect(hex(x.digest())).toBe(hex(y.digest()))
        },
      ),
      { numRuns: 60, seed: 11 },
    )
  })

  it('undoes an add with a remove, in any interleaving', () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { maxLength: 10 }), fc.array(fc.string(), { maxLength: 10 }), (base, extra) => {
        const h = new LtHash()
        base.forEach((i) => h.add(i))
        const before = hex(h.digest())
        const c = h.clone()
        extra.forEach((i) => c.add(i))
        ;[...extra].reverse().forEach((i) => c.remove(i))
        expect(hex(c.digest())).toBe(before)
        expect(hex(h.digest())).toBe(before)
      }),
      { numRuns: 60, seed: 12 },
    )
  })

  it('follows an update as remove-old then add-new', () => {
    const cidB = 'bafyreib2rxk3rh6kzwq6pyjfcf5j6gmqcsb3x7snqbsdpgrhxzg5oqdtpa'
    const h = new LtHash().addRecord('a.b.c', 'k', CID)
    h.removeRecord('a.b.c', 'k', CID).addRecord('a.b.c', 'k', cidB)
    expect(hex(h.digest())).toBe(hex(new LtHash().addRecord('a.b.c', 'k', cidB).digest()))
  })
})
