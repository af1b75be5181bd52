// The consent page's plain words for every permission form, parsed by the official parser.
import { describe, expect, it } from 'vitest'
import { consentWords } from '../src/oauth/consent-words.js'

const kinds = (scope: string) => consentWords(scope).groups.map((g) => [g.kind, g.items])

describe('consent words', () => {
  it.each([
    ['atproto', 'identity', 'Know who you are on the network (your DID and handle)'],
    ['repo:app.bsky.feed.post', 'records', 'Create, change and delete your posts'],
    ['repo:app.bsky.feed.like?action=create', 'records', 'Create your likes'],
    ['repo:app.bsky.graph.follow?action=create&action=delete', 'records', 'Create and delete your follows'],
    ['repo:com.example.thing?action=update', 'records', 'Change your “com.example.thing” records'],
    ['repo:*', 'records', 'Create, change and delete any of your records'],
    [
      'rpc:app.bsky.feed.getTimeline?aud=did:web:api.bsky.app%23bsky_appview',
      'services',
      'Use “app.bsky.feed.getTimeline” at did:web:api.bsky.app (bsky_appview) on your behalf',
    ],
    ['rpc:*?aud=did:web:api.bsky.app%23bsky_appview', 'services', 'Use any method of did:web:api.bsky.app (bsky_appview) on your behalf'],
    ['rpc:chat.bsky.convo.sendMessage?aud=*', 'chat', 'Use “chat.bsky.convo.sendMessage” at any service on your behalf'],
    ['blob:*/*', 'files', 'Upload files of any type'],
    ['blob:image/*', 'files', 'Upload images'],
    ['blob:video/mp4', 'files', 'Upload “video/mp4” files'],
    ['account:email', 'email', 'See your email address'],
    ['account:email?action=manage', 'email', 'See and change your email address'],
    ['account:repo?action=manage', 'account', 'Import data into your repository'],
    ['account:status', 'account', 'See whether your account is active'],
    ['account:status?action=manage', 'account', 'Deactivate and reactivate your account'],
    ['identity:handle', 'handle', 'Change your handle'],
    ['identity:*', 'handle', 'Change your handle and your whole identity (the keys and the server your DID document names)'],
    ['transition:email', 'email', 'See your email address'],
    ['transition:chat.bsky', 'chat', 'Read and send your Bluesky chat messages'],
    ['nonsense:thing', 'other', 'A permission this server cannot describe: nonsense:thing'],
  ])('%s', (scope, kind, words) => {
    expect(kinds(scope)).toEqual([[kind, [words]]])
  })

  it('transition:generic spans records, files, services and account settings', () => {
    expect(kinds('transition:generic').map(([k]) => k)).toEqual(['records', 'files', 'services', 'account'])
  })

  it('groups in a fixed order whatever the scope order, without repeats', () => {
    const w = consentWords('blob:image/* atproto repo:app.bsky.feed.post account:email transition:email')
    expect(w.groups.map((g) => g.kind)).toEqual(['identity', 'records', 'files', 'email'])
    expect(w.groups.find((g) => g.kind === 'email')!.items).toEqual(['See your email address'])
  })

  it('shows a permission set by its title and detail, with what it grants', () => {
    const w = consentWords('atproto include:com.example.calendar.basic', [
      {
        nsid: 'com.example.calendar.basic',
        title: 'Calendar',
        detail: 'Manage your events and RSVPs',
        permissions: ['repo:com.example.calendar.event'],
      },
    ])
    expect(w.sets).toEqual([
      {
        nsid: 'com.example.calendar.basic',
        title: 'Calendar',
        detail: 'Manage your events and RSVPs',
        items: ['Create, change and delete your “com.example.calendar.event” records'],
      },
    ])
    // a set nobody described is still named
    expect(consentWords('include:com.example.other').sets[0].title).toBe('Permissions defined by com.example.other')
  })

  it('words a space: permission with the declared name and the authority’s handle, and warns about every space of anyone', () => {
    const spaces = { typeNames: { 'com.example.chat.space': 'Group chat' }, handles: { 'did:plc:friend': 'friend.test' } }
    const w = consentWords(
      'atproto space:com.example.chat.space?authority=did:plc:friend&action=read space:com.example.chat.space',
      [],
      spaces,
    )
    expect(w.groups.find((g) => g.kind === 'spaces')!.items).toEqual([
      'In “Group chat” spaces @friend.test owns: read everything members wrote.',
      'In “Group chat” spaces you own: read everything members wrote and create, change and delete your records of the kinds the space type defines.',
    ])
    expect(w.warnings).toEqual([])
    // without a declared name or a verified handle: the NSID and the DID
    expect(kinds('space:com.example.chat.space?authority=did:plc:friend&action=read_self')).toEqual([
      ['spaces', ['In “com.example.chat.space” spaces did:plc:friend owns: read what you wrote.']],
    ])
    const wild = consentWords('atproto space:*?authority=*')
    expect(wild.warnings).toHaveLength(1)
    expect(consentWords('atproto space:*').warnings).toEqual([])
    // malformed: shown as a permission this server cannot describe
    expect(kinds('space:*?authority=nobody')).toEqual([['other', ['A permission this server cannot describe: space:*?authority=nobody']]])
  })

  it('words the space permissions a set grants among its items', () => {
    const w = consentWords(
      'include:com.example.chat.access',
      [{ nsid: 'com.example.chat.access', title: 'Chat', permissions: ['space:com.example.chat.space?action=read'] }],
      { typeNames: { 'com.example.chat.space': 'Group chat' }, handles: {} },
    )
    expect(w.sets[0].items).toEqual(['In “Group chat” spaces you own: read everything members wrote.'])
  })
})
