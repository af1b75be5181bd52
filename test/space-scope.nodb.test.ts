// The `space:` OAuth permission: parsing with its defaults, the token-time rewrite, what it grants,
// how a permission set carries it, and the consent page's sentence for it.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  type SpaceAsk,
  type SpaceRequest,
  SpaceScopeError,
  describeSpaceScope,
  formatSpaceScope,
  parseSpaceScope,
  rewriteSpaceScope,
  scopeStringAllows,
  spaceScopeAllows,
  spaceScopesOfPermissionSet,
} from '../src/space/scope.js'
import { ALICE, AUTHORITY } from './space-helpers.js'

const FORUM = { authority: AUTHORITY, type: 'com.example.forum', skey: 'main' }

describe('parsing space: permissions', () => {
  it('fills in the defaults', () => {
    expect(parseSpaceScope('space:com.example.forum')).toEqual({
      type: 'com.example.forum',
      authority: 'self',
      skey: '*',
      collections: undefined,
      actions: ['read', 'create', 'update', 'delete'],
      manage: [],
    })
  })

  it('reads every parameter, repeated ones as lists', () => {
    const s = parseSpaceScope(
      `space:com.example.forum?authority=${AUTHORITY}&skey=main&collection=com.example.forum.post&collection=com.example.forum.like&action=read_self&action=create&manage=update`,
    )
    expect(s).toEqual({
      type: 'com.example.forum',
      authority: AUTHORITY,
      skey: 'main',
      collections: ['com.example.forum.post', 'com.example.forum.like'],
      actions: ['read_self', 'create'],
      manage: ['update'],
    })
  })

  it('accepts percent-encoded values and wildcards', () => {
    expect(parseSpaceScope('space:*?authority=did%3Aweb%3Aexample.com&skey=*&collection=*').authority).toBe('did:web:example.com')
    expect(parseSpaceScope('space:*?authority=*').authority).toBe('*')
  })

  it.each([
    ['not a space permission', 'repo:com.example.forum'],
    ['no type', 'space:'],
    ['a type that is not an NSID', 'space:forum'],
    ['an unknown parameter', 'space:com.example.forum?audience=x'],
    ['a parameter without a value', 'space:com.example.forum?action'],
    ['an empty value', 'space:com.example.forum?action='],
    ['two authorities', `space:com.example.forum?authority=self&authority=${AUTHORITY}`],
    ['two skeys', 'space:com.example.forum?skey=a&skey=b'],
    ['a handle as authority', 'space:com.example.forum?authority=alice.example.com'],
    ['a malformed skey', 'space:com.example.forum?skey=..'],
    ['a collection that is not an NSID', 'space:com.example.forum?collection=post'],
    ['an unknown action', 'space:com.example.forum?action=write'],
    ['read as a manage verb', 'space:com.example.forum?manage=read'],
    ['bad percent-encoding', 'space:com.example.forum?skey=%E0%A4%A'],
  ])('refuses %s with SpaceScopeError', (_, value) => {
    expect(() => parseSpaceScope(value)).toThrow(SpaceScopeError)
  })

  it('formats to a string that parses back to the same permission', () => {
    const nsid = fc.constantFrom('com.example.forum', 'com.example.forum.post', 'org.example.chat.msg')
    const scope = fc.record({
      type: fc.oneof(nsid, fc.constant('*')),
      authority: fc.constantFrom('self', '*', AUTHORITY, 'did:web:example.com%3A8080'),
      skey: fc.constantFrom('*', 'main', '3kd2bxmiyd42b', 'a:b~c'),
      collections: fc.option(fc.uniqueArray(fc.oneof(nsid, fc.constant('*')), { maxLength: 3 }), { nil: undefined }),
      actions: fc.uniqueArray(fc.constantFrom('read_self', 'read', 'create', 'update', 'delete') as fc.Arbitrary<'read'>, { minLength: 1 }),
      manage: fc.uniqueArray(fc.constantFrom('create', 'update', 'delete') as fc.Arbitrary<'create'>),
    })
    fc.assert(
      fc.property(scope, (s) => {
        const back = parseSpaceScope(formatSpaceScope(s))
        expect({ ...back, actions: [...back.actions].sort(), manage: [...back.manage].sort() }).toEqual({
          ...s,
          collections: s.collections?.length ? s.collections : undefined,
          actions: [...s.actions].sort(),
          manage: [...s.manage].sort(),
        })
      }),
      { numRuns: 200, seed: 21 },
    )
    expect(formatSpaceScope(parseSpaceScope('space:com.example.forum?action=delete&action=create&action=update&action=read'))).toBe(
      'space:com.example.forum',
    )
    expect(formatSpaceScope(parseSpaceScope(`space:*?authority=${AUTHORITY}`))).toBe(`space:*?authority=${AUTHORITY}`)
  })
})

describe('the token-time rewrite', () => {
  it('replaces self with the user and fills in the declared collections', () => {
    const s = rewriteSpaceScope(parseSpaceScope('space:com.example.forum'), ALICE, ['com.example.forum.post'])
    expect(s).toMatchObject({ authority: ALICE, collections: ['com.example.forum.post'] })
    expect(formatSpaceScope(s)).toBe(`space:com.example.forum?authority=${ALICE}&collection=com.example.forum.post`)
  })

  it('keeps collections the app named and grants none for any type', () => {
    expect(
      rewriteSpaceScope(parseSpaceScope('space:com.example.forum?collection=com.example.x'), ALICE, ['com.example.y']).collections,
    ).toEqual(['com.example.x'])
    expect(rewriteSpaceScope(parseSpaceScope('space:*'), ALICE).collections).toEqual([])
  })

  it('refuses a concrete type whose declaration cannot be had', () => {
    expect(() => rewriteSpaceScope(parseSpaceScope('space:com.example.forum'), ALICE, undefined)).toThrow(SpaceScopeError)
    expect(() => rewriteSpaceScope(parseSpaceScope('space:com.example.forum'), ALICE, ['not an nsid'])).toThrow(SpaceScopeError)
  })
})

describe('what a space: permission grants', () => {
  const grant = (value: string, req: { space: SpaceRequest['space'] } & SpaceAsk, declared = ['com.example.forum.post']) =>
    spaceScopeAllows(rewriteSpaceScope(parseSpaceScope(value), AUTHORITY, declared), { user: AUTHORITY, ...req })
  const read = { space: FORUM, action: 'read' as const }

  it('matches type, authority and skey exactly or by wildcard', () => {
    expect(grant('space:com.example.forum', read)).toBe(true) // self = the authority here
    expect(grant('space:com.example.chat', read)).toBe(false)
    expect(grant('space:*', read)).toBe(true)
    expect(grant(`space:com.example.forum?authority=${ALICE}`, read)).toBe(false)
    expect(grant('space:com.example.forum?authority=*', read)).toBe(true)
    expect(grant('space:com.example.forum?skey=main', read)).toBe(true)
    expect(grant('space:com.example.forum?skey=other', read)).toBe(false)
  })

  it('resolves self against the token’s user when matching an unrewritten permission', () => {
    const s = parseSpaceScope('space:com.example.forum')
    expect(spaceScopeAllows(s, { user: AUTHORITY, ...read })).toBe(true)
    expect(spaceScopeAllows(s, { user: ALICE, ...read })).toBe(false)
  })

  it('lets read imply read_self but not the reverse', () => {
    expect(grant('space:com.example.forum?action=read', { space: FORUM, action: 'read_self' })).toBe(true)
    expect(grant('space:com.example.forum?action=read_self', { space: FORUM, action: 'read_self' })).toBe(true)
    expect(grant('space:com.example.forum?action=read_self', read)).toBe(false)
    expect(grant('space:com.example.forum?action=create', read)).toBe(false)
  })

  it('needs the collection listed for writes', () => {
    const create = (collection?: string) => ({ space: FORUM, action: 'create' as const, collection })
    expect(grant('space:com.example.forum', create('com.example.forum.post'))).toBe(true)
    expect(grant('space:com.example.forum', create('com.example.forum.like'))).toBe(false)
    expect(grant('space:com.example.forum', create())).toBe(false)
    expect(grant('space:com.example.forum?collection=*', create('com.example.anything'))).toBe(true)
    expect(grant('space:*', create('com.example.forum.post'))).toBe(false) // any type declares no collections
    expect(grant('space:com.example.forum?action=read', create('com.example.forum.post'))).toBe(false)
    expect(grant('space:com.example.forum?action=delete', { space: FORUM, action: 'delete', collection: 'com.example.forum.post' })).toBe(
      true,
    )
    // not rewritten and no collections: nothing to write
    expect(spaceScopeAllows(parseSpaceScope('space:com.example.forum'), { user: AUTHORITY, ...create('com.example.forum.post') })).toBe(
      false,
    )
  })

  it('grants management verbs only when named', () => {
    expect(grant('space:com.example.forum', { space: FORUM, manage: 'create' })).toBe(false)
    expect(grant('space:com.example.forum?manage=create', { space: FORUM, manage: 'create' })).toBe(true)
    expect(grant('space:com.example.forum?manage=create', { space: FORUM, manage: 'delete' })).toBe(false)
    expect(grant('space:com.example.forum?manage=update&manage=delete', { space: FORUM, manage: 'delete' })).toBe(true)
  })

  it('lists spaces only with read_self over the wildcards asked', () => {
    const list = (type: string, authority: string) => ({ space: { type, authority, skey: '*' }, action: 'read_self' as const })
    expect(grant('space:*?authority=*', list('*', '*'))).toBe(true)
    expect(grant('space:com.example.forum?authority=*', list('*', '*'))).toBe(false)
    expect(grant('space:com.example.forum?authority=*', list('com.example.forum', '*'))).toBe(true)
    expect(grant('space:com.example.forum?skey=main', list('com.example.forum', AUTHORITY))).toBe(false)
  })

  it('reads a token’s whole scope string, ignoring other and malformed permissions', () => {
    const scope = `atproto transition:generic repo:* space:bad?x space:com.example.forum?authority=${AUTHORITY}&action=read`
    expect(scopeStringAllows(scope, { user: ALICE, ...read })).toBe(true)
    expect(scopeStringAllows('atproto transition:generic', { user: ALICE, ...read })).toBe(false)
  })
})

describe('space permissions in permission sets', () => {
  it('become space: scopes under the set’s namespace only', () => {
    const scopes = spaceScopesOfPermissionSet('com.example.authForum', [
      { type: 'permission', resource: 'space', spaceType: 'com.example.forum', collection: ['com.other.post'], action: ['read', 'create'] },
      { type: 'permission', resource: 'space', spaceType: 'com.example.chat', skey: 'self', manage: 'create' },
      { type: 'permission', resource: 'space', spaceType: '*' },
      { type: 'permission', resource: 'space', spaceType: 'org.other.forum' },
      { type: 'permission', resource: 'space', spaceType: 'com.example.forum', action: 'write' },
      { type: 'permission', resource: 'repo', collection: ['com.example.forum.post'] },
      'junk',
    ])
    expect(scopes).toEqual([
      'space:com.example.forum?collection=com.other.post&action=read&action=create',
      'space:com.example.chat?skey=self&manage=create',
    ])
  })
})

describe('consent words', () => {
  const say = (value: string, ctx = {}) => describeSpaceScope(parseSpaceScope(value), ctx)

  it.each([
    [
      'space:com.example.forum',
      'In “com.example.forum” spaces you own: read everything members wrote and create, change and delete your records of the kinds the space type defines.',
    ],
    [
      'space:com.example.forum?collection=com.example.forum.post&action=read_self&action=create',
      'In “com.example.forum” spaces you own: read what you wrote and create your “com.example.forum.post” records.',
    ],
    [
      `space:com.example.forum?authority=${AUTHORITY}&skey=main&action=read`,
      `In the space “main” (“com.example.forum”) ${AUTHORITY} owns: read everything members wrote.`,
    ],
    ['space:*?authority=*&action=read', 'In any space anyone owns: read everything members wrote.'],
    [
      'space:com.example.forum?action=read_self&manage=create&manage=update&manage=delete',
      'In “com.example.forum” spaces you own: read what you wrote, create such spaces, change their settings and members and delete them.',
    ],
    ['space:com.example.forum?collection=*&action=update', 'In “com.example.forum” spaces you own: change any of your records.'],
  ])('%s', (value, text) => {
    expect(say(value).text).toBe(text)
  })

  it('uses the declaration’s name and the authority’s handle when known', () => {
    expect(
      say(`space:com.example.forum?authority=${AUTHORITY}&action=read`, { typeName: 'Forum', authorityHandle: 'bob.example.com' }).text,
    ).toBe('In “Forum” spaces @bob.example.com owns: read everything members wrote.')
  })

  it('warns for any kind of space of anyone, and only then', () => {
    expect(say('space:*?authority=*').warning).toBe(true)
    expect(say('space:*').warning).toBe(false)
    expect(say('space:com.example.forum?authority=*').warning).toBe(false)
  })
})
