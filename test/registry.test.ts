import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ensureValidNsid } from '@atproto/syntax'
import { registry as methodRows, type Row } from '../src/auth/registry.js'
import { scopeFor } from '../src/auth/permissions.js'
import { handlerMethods } from '../codegen/handlers.ts'
import { method, type Method } from '../src/api/method.js'
import { handlers } from '../src/generated/handlers.js'
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
      if (['query', 'procedure', 'subscription'].includes(doc.defs?.main?.type) && !SERVED_ELSEWHERE.includes(doc.id)) out.push(doc.id)
    }
  }
  return out.sort()
}

// methods this server calls on others (a space's managing app, a registered syncer) and never serves
const SERVED_ELSEWHERE = ['com.atproto.simplespace.checkUserAccess', 'com.atproto.space.notifySpaceDeleted']

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

  it('mounts each handler file as the method its path names, and no other', () => {
    for (const [nsid, mod] of Object.entries(handlers)) expect(mod.id).toBe(nsid)
    // the compiler holds the rest (`make lint` type-checks this file)
    const revoke = method('com.atproto.server.revokeAppPassword', () => async () => {})
    // @ts-expect-error a file at getSession's path may not declare another method
    const misplaced: Method<'com.atproto.server.getSession'> = revoke
    // @ts-expect-error a method without a lexicon and a registry row cannot be declared
    const unknown = method('io.example.unlisted', () => async () => {})
    expect([misplaced.id, unknown.id]).toEqual(['com.atproto.server.revokeAppPassword', 'io.example.unlisted'])
  })

  it('names only valid method ids with a known check', () => {
    for (const [nsid, row] of Object.entries(registry)) {
      expect(() => ensureValidNsid(nsid)).not.toThrow()
      expect(['none', 'access', 'optional', 'refresh', 'admin', 'moderator', 'spaceCredential', 'delegation', 'spaceNotify']).toContain(
        row.check,
      )
    }
  })

  it('declares the permission each OAuth call needs, from its input', () => {
    const call = { params: {}, appView: 'did:web:api.bsky.app#bsky_appview', proxyTo: 'did:web:api.bsky.app#bsky_appview' }
    const needs = (
      nsid: string,
      input: { params?: Record<string, unknown>; contentType?: string; body?: Record<string, unknown> } = {},
    ) => {
      const row = registry[nsid]
      const p = row.permissions
      const fromCall = typeof p === 'function' ? p({ ...call, params: input.params ?? {}, contentType: input.contentType }) : (p ?? [])
      return [...fromCall, ...(row.bodyPermissions?.(input.body ?? {}) ?? [])].map(scopeFor)
    }
    const post = { collection: 'app.bsky.feed.post' }
    expect(needs('com.atproto.repo.createRecord', { body: post })).toEqual(['repo:app.bsky.feed.post?action=create'])
    expect(needs('com.atproto.repo.putRecord', { body: post })).toEqual([
      'repo:app.bsky.feed.post?action=create',
      'repo:app.bsky.feed.post?action=update',
    ])
    expect(needs('com.atproto.repo.deleteRecord', { body: post })).toEqual(['repo:app.bsky.feed.post?action=delete'])
    const writes = [
      { $type: 'com.atproto.repo.applyWrites#create', collection: 'app.bsky.feed.like' },
      { $type: 'com.atproto.repo.applyWrites#update', collection: 'app.bsky.actor.profile' },
      { $type: 'com.atproto.repo.applyWrites#delete', collection: 'app.bsky.feed.post' },
    ]
    expect(needs('com.atproto.repo.applyWrites', { body: { writes } })).toEqual([
      'repo:app.bsky.feed.like?action=create',
      'repo:app.bsky.actor.profile?action=update',
      'repo:app.bsky.feed.post?action=delete',
    ])
    expect(needs('com.atproto.repo.uploadBlob', { contentType: 'image/png' })).toEqual(['blob:image/png'])
    expect(needs('com.atproto.identity.updateHandle')).toEqual(['identity:handle'])
    // a custom feed's token goes on to its generator: an app needs both methods at the AppView
    expect(needs('app.bsky.feed.getFeed')).toEqual([
      'rpc:app.bsky.feed.getFeed?aud=did:web:api.bsky.app%23bsky_appview',
      'rpc:app.bsky.feed.getFeedSkeleton?aud=did:web:api.bsky.app%23bsky_appview',
    ])
    expect(needs('app.bsky.notification.registerPush', { body: { serviceDid: 'did:web:push.example' } })).toEqual([
      'rpc:app.bsky.notification.registerPush?aud=did:web:push.example%23bsky_notif',
    ])
    expect(needs('com.atproto.identity.signPlcOperation')).toEqual(['identity:*'])
    expect(needs('com.atproto.server.deactivateAccount')).toEqual(['account:status?action=manage'])
    expect(needs('com.atproto.server.activateAccount')).toEqual(['account:status?action=manage'])
    expect(needs('com.atproto.server.confirmEmail')).toEqual(['account:email?action=manage'])
    expect(needs('com.atproto.repo.importRepo')).toEqual(['account:repo?action=manage'])
    expect(needs('app.bsky.actor.putPreferences')).toEqual(['rpc:app.bsky.actor.putPreferences?aud=did:web:api.bsky.app%23bsky_appview'])
    expect(needs('com.atproto.server.getServiceAuth', { params: { aud: 'did:web:feed.example', lxm: 'CHAT.bsky.convo.getLog' } })).toEqual([
      'rpc:chat.bsky.convo.getLog?aud=did:web:feed.example',
    ])
    // reads and the session itself need nothing beyond atproto
    for (const nsid of ['com.atproto.server.getSession', 'com.atproto.repo.getRecord', 'com.atproto.server.checkAccountStatus']) {
      expect([nsid, needs(nsid)]).toEqual([nsid, []])
    }
  })

  it('admits a taken-down account to createReport alone', () => {
    const admitted = Object.entries(registry as Record<string, { statuses?: readonly string[] }>)
      .filter(([, r]) => r.statuses?.includes('takendown'))
      .map(([n]) => n)
    expect(admitted).toEqual(['com.atproto.moderation.createReport'])
  })

  it('keeps the deactivated exceptions to checkAccountStatus, activateAccount, what migrating in needs and own space reads', () => {
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
        // reading one's own permissioned repos and listing one's spaces
        'com.atproto.space.getBlob',
        'com.atproto.space.getLatestCommit',
        'com.atproto.space.getRecord',
        'com.atproto.space.getRepo',
        'com.atproto.space.listBlobs',
        'com.atproto.space.listRecords',
        'com.atproto.space.listRepoOps',
        'com.atproto.space.listSpaces',
      ].sort(),
    )
  })
})
