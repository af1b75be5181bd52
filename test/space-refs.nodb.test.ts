// Space references, skeys and space record URIs: what parses, and the 400 InvalidRequest the rest gets.
import { describe, expect, it } from 'vitest'
import {
  isSpaceRef,
  isSpaceUri,
  isValidSkey,
  parseSpaceRecordUri,
  parseSpaceRef,
  spaceHostAudience,
  spaceRecordUri,
  spaceRef,
} from '../src/space/refs.js'
import { ALICE, AUTHORITY, SPACE, answerOf } from './space-helpers.js'

describe('space references', () => {
  it('parses the four-segment form into authority, type and skey', () => {
    expect(parseSpaceRef(SPACE)).toEqual({ authority: AUTHORITY, type: 'com.example.forum', skey: '3kd2bxmiyd42b', uri: SPACE })
    expect(parseSpaceRef('at://did:web:example.com%3A8080/space/com.example.forum/self').authority).toBe('did:web:example.com%3A8080')
    expect(spaceRef(AUTHORITY, 'com.example.forum', '3kd2bxmiyd42b').uri).toBe(SPACE)
  })

  it.each([
    ['a handle as authority', 'at://alice.example.com/space/com.example.forum/self'],
    ['no at:// scheme', 'did:plc:authority234567abcdefghij/space/com.example.forum/self'],
    ['a record path', `${SPACE}/${ALICE}/com.example.post/abc`],
    ['a trailing slash', `${SPACE}/`],
    ['a query', `${SPACE}?x=1`],
    ['a fragment', `${SPACE}#frag`],
    ['a public collection instead of the marker', 'at://did:plc:authority234567abcdefghij/app.bsky.feed.post/com.example.forum/self'],
    ['a marker in another case', 'at://did:plc:authority234567abcdefghij/Space/com.example.forum/self'],
    ['a type that is not an NSID', 'at://did:plc:authority234567abcdefghij/space/forum/self'],
    ['an skey of "."', 'at://did:plc:authority234567abcdefghij/space/com.example.forum/.'],
    ['an skey of ".."', 'at://did:plc:authority234567abcdefghij/space/com.example.forum/..'],
    ['an empty skey', 'at://did:plc:authority234567abcdefghij/space/com.example.forum/'],
    ['an skey with a space', 'at://did:plc:authority234567abcdefghij/space/com.example.forum/a b'],
    ['an skey over 512 characters', `at://did:plc:authority234567abcdefghij/space/com.example.forum/${'a'.repeat(513)}`],
    ['an empty string', ''],
  ])('refuses %s with InvalidRequest', async (_, uri) => {
    expect(isSpaceRef(uri)).toBe(false)
    expect(await answerOf(() => parseSpaceRef(uri))).toEqual({ status: 400, error: 'InvalidRequest' })
  })

  it('says what is wrong in the message', () => {
    expect(() => parseSpaceRef('at://alice.example.com/space/com.example.forum/self')).toThrow(/authority must be a DID/)
    expect(() => parseSpaceRef(`${SPACE}/`)).toThrow(/no record path, query or trailing slash/)
  })

  it('accepts skeys of record-key syntax up to 512 characters', () => {
    for (const ok of ['self', '3kd2bxmiyd42b', 'my-forum_2:x~y.z', 'a'.repeat(512)]) expect(isValidSkey(ok)).toBe(true)
    for (const bad of ['', '.', '..', 'a/b', 'é', 'a'.repeat(513)]) expect(isValidSkey(bad)).toBe(false)
  })

  it('builds and parses record URIs with the writer as author', async () => {
    const space = parseSpaceRef(SPACE)
    const uri = spaceRecordUri(space, ALICE, 'com.example.forum.post', '3kd2bxmiyd42c')
    expect(uri).toBe(`${SPACE}/${ALICE}/com.example.forum.post/3kd2bxmiyd42c`)
    expect(parseSpaceRecordUri(uri)).toMatchObject({ space, author: ALICE, collection: 'com.example.forum.post', rkey: '3kd2bxmiyd42c' })
    expect(await answerOf(() => spaceRecordUri(space, 'alice.example.com', 'com.example.forum.post', 'x'))).toEqual({
      status: 400,
      error: 'InvalidRequest',
    })
    expect(await answerOf(() => parseSpaceRecordUri(`${SPACE}/${ALICE}/post/x`))).toEqual({ status: 400, error: 'InvalidRequest' })
    expect(await answerOf(() => parseSpaceRecordUri(SPACE))).toEqual({ status: 400, error: 'InvalidRequest' })
  })

  it('tells permissioned URIs from public ones', () => {
    expect(isSpaceUri(SPACE)).toBe(true)
    expect(isSpaceUri(`${SPACE}/${ALICE}/com.example.forum.post/x`)).toBe(true)
    expect(isSpaceUri(`at://${ALICE}/app.bsky.feed.post/x`)).toBe(false)
  })

  it('addresses the space host as the authority with #atproto_space_host', () => {
    expect(spaceHostAudience(AUTHORITY)).toBe(`${AUTHORITY}#atproto_space_host`)
  })
})
