import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ensureValidNsid } from '@atproto/syntax'
import { registry as methodRows, type Row } from '../src/auth/registry.js'
import { handlerMethods } from '../codegen/handlers.ts'
import { describe, startTestPds, type TestPds } from './harness.js'

// looked up by arbitrary (fuzzed or listed) method ids
const registry: Record<string, Row> = methodRows

function lexiconMethods(dir = 'lexicons'): string[] {
  const out: string[] = []
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) out.push(...lexiconMethods(p))
    else if (e.name.endsWith('.json')) {
      const doc = JSON.parse(readFileSync(p, 'utf8'))
      if (['query', 'procedure', 'subscription'].includes(doc.defs?.main?.type)) out.push(doc.id)
    }
  }
  return out.sort()
}

describe('auth registry', () => {
  let pds: TestPds
  beforeAll(async () => {
    pds = await startTestPds()
  })
  afterAll(() => pds?.stop())

  it('gives every lexicon method exactly one handler and one registry row', () => {
    const methods = lexiconMethods()
    expect(methods.length).toBeGreaterThan(0)
    expect([...pds.methods].sort()).toEqual(methods)
    for (const m of methods) expect(registry[m], m).toBeDefined()
  })

  it('serves exactly the methods that have a handler file under src/api/', () => {
    expect(handlerMethods().length).toBeGreaterThan(0)
    expect([...pds.methods].sort()).toEqual(handlerMethods())
  })

  it('names only valid method ids with a known check', () => {
    for (const [nsid, row] of Object.entries(registry)) {
      expect(() => ensureValidNsid(nsid)).not.toThrow()
      expect(['none', 'access', 'optional', 'refresh', 'admin']).toContain(row.check)
    }
  })

  it('keeps the deactivated exceptions to checkAccountStatus, activateAccount and what migrating in needs', () => {
    const admitted = Object.entries(registry)
      .filter(([, r]) => r.statuses?.includes('deactivated'))
      .map(([n]) => n)
      .sort()
    expect(admitted).toEqual(
      [
        'app.bsky.actor.getPreferences',
        'app.bsky.actor.putPreferences',
        'com.atproto.identity.getRecommendedDidCredentials',
        'com.atproto.identity.submitPlcOperation',
        'com.atproto.repo.importRepo',
        'com.atproto.repo.listMissingBlobs',
        'com.atproto.repo.uploadBlob',
        'com.atproto.server.activateAccount',
        'com.atproto.server.checkAccountStatus',
        'com.atproto.sync.listMissingBlobs',
      ].sort(),
    )
  })
})
