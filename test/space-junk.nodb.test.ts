// Whatever a caller sends, the space primitives answer with their named errors, never a crash
// that would become a 500.
import { XRPCError } from '@atproto/xrpc-server'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { CommitError, commitFromCbor, commitFromJson } from '../src/space/commit.js'
import { decodeOpsCursor, encodeOpsCursor } from '../src/space/oplog.js'
import { parseSpaceRecordUri, parseSpaceRef } from '../src/space/refs.js'
import { SpaceScopeError, parseSpaceScope } from '../src/space/scope.js'
import { verifyDelegationToken, verifySpaceCredential } from '../src/space/tokens.js'
import { SPACE } from './space-helpers.js'

// strings near the valid forms, plus arbitrary ones
const near = (valid: string) =>
  fc.oneof(
    fc.string({ unit: 'binary' }),
    fc.tuple(fc.nat({ max: valid.length }), fc.string({ maxLength: 4 })).map(([at, s]) => valid.slice(0, at) + s + valid.slice(at + 1)),
  )

function xrpcName(fn: () => unknown): string {
  try {
    fn()
    return 'ok'
  } catch (err) {
    if (err instanceof XRPCError) return `${err.statusCode} ${err.error}`
    throw err
  }
}

describe('junk input', () => {
  it('space references: parsed or 400 InvalidRequest', () => {
    fc.assert(
      fc.property(near(SPACE), (s) => {
        expect(['ok', '400 InvalidRequest']).toContain(xrpcName(() => parseSpaceRef(s)))
        expect(['ok', '400 InvalidRequest']).toContain(xrpcName(() => parseSpaceRecordUri(`${s}/did:plc:x/a.b.c/k`)))
      }),
      { numRuns: 300, seed: 31 },
    )
  })

  it('oplog cursors: round-trip or 400 MalformedCursor', () => {
    fc.assert(
      fc.property(near('3kd2bxmiyd42b/12'), (s) => {
        expect(['ok', '400 MalformedCursor']).toContain(xrpcName(() => decodeOpsCursor(s)))
      }),
      { numRuns: 300, seed: 32 },
    )
    fc.assert(
      fc.property(fc.nat({ max: 999_999_999 }), (i) => {
        expect(decodeOpsCursor(encodeOpsCursor('3kd2bxmiyd42b', i))).toEqual({ rev: '3kd2bxmiyd42b', index: i })
      }),
      { numRuns: 100, seed: 33 },
    )
  })

  it('space: permissions: parsed or SpaceScopeError', () => {
    fc.assert(
      fc.property(
        near('space:com.example.forum?authority=did:plc:abc&skey=main&collection=com.example.forum.post&action=read&manage=update'),
        (s) => {
          try {
            parseSpaceScope(s)
          } catch (err) {
            expect(err).toBeInstanceOf(SpaceScopeError)
          }
        },
      ),
      { numRuns: 300, seed: 34 },
    )
  })

  it('commits on the wire: read or CommitError', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.uint8Array({ maxLength: 64 }), (json, bytes) => {
        for (const read of [() => commitFromJson(json), () => commitFromCbor(bytes)]) {
          try {
            read()
          } catch (err) {
            expect(err).toBeInstanceOf(CommitError)
          }
        }
      }),
      { numRuns: 300, seed: 35 },
    )
  })

  it('tokens: only the 401 names', async () => {
    const deps = { keyFor: async () => undefined, now: () => Date.UTC(2026, 0, 1), claimOnce: async () => true }
    const names = ['MissingJwt', 'BadJwt', 'BadJwtType', 'BadJwtIss', 'BadJwtAudience', 'BadJwtSignature', 'JwtExpired']
    const jsonPart = fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'))
    const token = fc.oneof(
      fc.string(),
      fc.tuple(jsonPart, jsonPart, fc.base64String()).map((p) => p.join('.')),
    )
    await fc.assert(
      fc.asyncProperty(token, async (t) => {
        for (const verify of [verifyDelegationToken, verifySpaceCredential]) {
          try {
            await verify(t, deps)
            expect.unreachable('a junk token verified')
          } catch (err) {
            expect(err).toBeInstanceOf(XRPCError)
            expect(names).toContain((err as XRPCError).error)
          }
        }
      }),
      { numRuns: 300, seed: 36 },
    )
  })
})
