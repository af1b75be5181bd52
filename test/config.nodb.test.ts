import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { ConfigError, loadConfig } from '../src/config.js'
import { describe, tempDir } from './harness.js'

const base = () => ({ PDS_DATA_DIRECTORY: tempDir() })

describe('configuration', () => {
  const bad: [string, string][] = [
    ['PDS_PORT', 'eighty'],
    ['PDS_PORT', '70000'],
    ['PDS_HOSTNAME', 'has space'],
    ['PDS_PUBLIC_URL', 'ftp://x'],
    ['PDS_DB_POSTGRES_URL', 'mysql://x'],
    ['PDS_DB_POSTGRES_SCHEMA', 'Bad-Schema'],
    ['PDS_JWT_SECRET', 'short'],
    ['PDS_OAUTH_SIGNING_KEY', 'abc'],
    ['PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX', 'z'.repeat(64)],
    ['PDS_DID_PLC_URL', 'not a url'],
    ['PDS_SERVICE_HANDLE_DOMAINS', 'test'],
    ['PDS_INVITE_REQUIRED', 'maybe'],
    ['PDS_EMAIL_BACKEND', 'smtp'],
    ['PDS_EMAIL_HTTP_FLAVOR', 'sparkpost'],
    ['PDS_EMAIL_HTTP_TIMEOUT_MS', '0'],
    ['PDS_DPOP_REPLAY_STORE', 'disk'],
    ['PDS_REDIS_URL', 'http://x'],
    ['PDS_LOG_LEVEL', 'loud'],
    ['PDS_RATE_LIMITS_ENABLED', 'yes'],
    ['PDS_CRAWLERS', 'https://ok.example,bad'],
    ['PDS_BSKY_APP_VIEW_DID', 'not-a-did'],
    ['PDS_BSKY_APP_VIEW_CDN_URL_PATTERN', 'https://cdn.example/%s'],
    ['PDS_METRICS', 'on'],
    ['PDS_FIREHOSE_RETENTION_HOURS', '-1'],
    ['PDS_BLOB_UPLOAD_LIMIT', '0'],
    ['PDS_RATE_LIMIT_MULTIPLIER', '0'],
    ['PDS_RATE_LIMIT_BYPASS_KEY', 'short'],
    ['PDS_METRICS_PORT', '70000'],
    ['PDS_PROXY_TIMEOUT_MS', 'soon'],
    ['PDS_PROXY_MAX_RESPONSE_BYTES', '-5'],
    ['PDS_CRAWL_INTERVAL_MINUTES', '0'],
    ['PDS_DEV_MODE', 'sometimes'],
    ['PDS_DNS_NAMESERVERS', '1.1.1.1,dns.example'],
    ['PDS_DNS_NAMESERVERS', '1.1.1.1:99999'],
    ['PDS_TRUST_PROXY', 'loopback, everyone'],
    ['PDS_ADMIN_PASSWORD', 'fifteen-chars!!'],
    ['PDS_RESERVED_HANDLES', 'ok,two.labels'],
    ['PDS_LEXICON_AUTHORITY_DID', 'lexicons.example.com'],
  ]
  for (const [name, value] of bad) {
    it(`refuses ${name}=${JSON.stringify(value)} with a message naming it`, () => {
      expect(() => loadConfig({ ...base(), [name]: value })).toThrowError(ConfigError)
      expect(() => loadConfig({ ...base(), [name]: value })).toThrowError(new RegExp(`^${name}: `))
    })
  }

  it('runs in development mode on localhost names only, unless PDS_DEV_MODE says otherwise', () => {
    const mode = (env: Record<string, string>) => loadConfig({ ...base(), ...env }).devMode
    expect(mode({})).toBe(true)
    expect(mode({ PDS_HOSTNAME: 'pds2.localhost' })).toBe(true)
    expect(mode({ PDS_HOSTNAME: 'pds.example.com' })).toBe(false)
    expect(mode({ PDS_HOSTNAME: 'localhost.example.com' })).toBe(false)
    expect(mode({ PDS_DEV_MODE: 'false' })).toBe(false)
    expect(mode({ PDS_HOSTNAME: 'pds.example.com', PDS_DEV_MODE: 'true' })).toBe(true)
  })

  it('joins the public network outside development mode: plc.directory and bsky.network unless told otherwise', () => {
    const prod = (env: Record<string, string> = {}) => loadConfig({ ...base(), PDS_HOSTNAME: 'pds.example.com', ...env })
    expect(prod()).toMatchObject({ plcUrl: 'https://plc.directory', crawlers: ['https://bsky.network'] })
    expect(prod().warnings.some((w) => w.startsWith('PDS_DID_PLC_URL'))).toBe(false)
    expect(prod({ PDS_DID_PLC_URL: 'https://plc.example.org/', PDS_CRAWLERS: 'https://relay.example.org' })).toMatchObject({
      plcUrl: 'https://plc.example.org',
      crawlers: ['https://relay.example.org'],
    })
    // set but empty: no crawl requests at all
    expect(prod({ PDS_CRAWLERS: '' }).crawlers).toEqual([])
    // `local` keeps DIDs in this server's own log, with a warning at start
    const local = prod({ PDS_DID_PLC_URL: 'local' })
    expect(local.plcUrl).toBeUndefined()
    expect(local.warnings.some((w) => w.startsWith('PDS_DID_PLC_URL is local'))).toBe(true)
  })

  it('keeps development servers off the public network unless told otherwise', () => {
    const dev = (env: Record<string, string> = {}) => loadConfig({ ...base(), ...env })
    expect(dev()).toMatchObject({ plcUrl: undefined, crawlers: [] })
    expect(dev().warnings.some((w) => w.startsWith('PDS_DID_PLC_URL'))).toBe(false)
    expect(dev({ PDS_DID_PLC_URL: 'local' }).warnings.some((w) => w.startsWith('PDS_DID_PLC_URL'))).toBe(false)
    expect(dev({ PDS_DID_PLC_URL: 'http://127.0.0.1:2582' }).plcUrl).toBe('http://127.0.0.1:2582')
    expect(dev({ PDS_HOSTNAME: 'pds.example.com', PDS_DEV_MODE: 'true' })).toMatchObject({ plcUrl: undefined, crawlers: [] })
  })

  it('reads PDS_RESERVED_HANDLES as a lower-case list of labels', () => {
    expect(loadConfig({ ...base(), PDS_RESERVED_HANDLES: ' Ops, billing ,' }).reservedHandles).toEqual(['ops', 'billing'])
    expect(loadConfig(base()).reservedHandles).toEqual([])
  })

  it('reads PDS_DNS_NAMESERVERS as a list of ip[:port]', () => {
    const servers = '1.1.1.1, 127.0.0.1:5353,[2606:4700::1111]:53,2606:4700::1001'
    expect(loadConfig({ ...base(), PDS_DNS_NAMESERVERS: servers }).dnsNameservers).toEqual([
      '1.1.1.1',
      '127.0.0.1:5353',
      '[2606:4700::1111]:53',
      '2606:4700::1001',
    ])
    expect(loadConfig(base()).dnsNameservers).toEqual([])
  })

  it('applies the documented defaults', () => {
    const c = loadConfig(base())
    expect(c.port).toBe(2583)
    expect(c.bind).toBe('0.0.0.0')
    expect(c.serviceDid).toBe('did:web:localhost')
    expect(c.publicUrl).toBe('http://localhost:2583')
    expect(c.handleDomains).toEqual(['.test'])
    expect(c.db.kind).toBe('sqlite')
    expect(c.email.backend).toBe('console')
    expect(c.dpopReplayStore).toBe('in-memory')
    expect(c.rateLimitsEnabled).toBe(true)
    expect(c.firehoseRetentionHours).toBe(72)
    expect(c.blobUploadLimit).toBe(104857600)
  })

  it('derives an https public URL from a real hostname', () => {
    expect(loadConfig({ ...base(), PDS_HOSTNAME: 'pds.example.com' }).publicUrl).toBe('https://pds.example.com')
  })

  it('requires URL, token and sender for the http-json email backend', () => {
    const env = { ...base(), PDS_EMAIL_BACKEND: 'http-json', PDS_EMAIL_HTTP_URL: 'http://127.0.0.1:1/send' }
    expect(() => loadConfig(env)).toThrowError(/^PDS_EMAIL_HTTP_TOKEN: required/)
    expect(() => loadConfig({ ...env, PDS_EMAIL_HTTP_TOKEN: 't' })).toThrowError(/^PDS_EMAIL_FROM: required/)
  })

  it('accepts vendor and shared as aliases', () => {
    const c = loadConfig({
      ...base(),
      PDS_EMAIL_HTTP_FLAVOR: 'vendor',
      PDS_DPOP_REPLAY_STORE: 'shared',
      PDS_REDIS_URL: 'redis://127.0.0.1:6379',
    })
    expect(c.dpopReplayStore).toBe('redis')
    expect(
      loadConfig({
        ...base(),
        PDS_EMAIL_BACKEND: 'http-json',
        PDS_EMAIL_HTTP_URL: 'http://127.0.0.1:1',
        PDS_EMAIL_HTTP_TOKEN: 't',
        PDS_EMAIL_FROM: 'a@b.c',
        PDS_EMAIL_HTTP_FLAVOR: 'vendor',
      }).email,
    ).toMatchObject({ flavor: 'postmark' })
  })

  it('warns in exactly one line that the console email backend prints mail, tokens included', () => {
    const secrets = {
      PDS_JWT_SECRET: 'x'.repeat(32),
      PDS_OAUTH_SIGNING_KEY: '1'.repeat(64),
      PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: '2'.repeat(64),
    }
    const mailWarnings = (env: Record<string, string>) =>
      loadConfig({ ...base(), ...secrets, ...env }).warnings.filter((w) => /email/i.test(w))
    const consoleLines = mailWarnings({})
    expect(consoleLines).toHaveLength(1)
    expect(consoleLines[0]).toMatch(/tokens included/)
    expect(
      mailWarnings({
        PDS_EMAIL_BACKEND: 'http-json',
        PDS_EMAIL_HTTP_URL: 'http://127.0.0.1:1',
        PDS_EMAIL_HTTP_TOKEN: 't',
        PDS_EMAIL_FROM: 'a@b.c',
      }),
    ).toEqual([])
  })

  it('refuses the redis replay store without PDS_REDIS_URL', () => {
    expect(() => loadConfig({ ...base(), PDS_DPOP_REPLAY_STORE: 'redis' })).toThrowError(/^PDS_REDIS_URL: /)
  })

  it('demands every secret from the environment when PostgreSQL is configured', () => {
    const env = { ...base(), PDS_DB_POSTGRES_URL: 'postgres://127.0.0.1/test' }
    expect(() => loadConfig(env)).toThrowError(/^PDS_JWT_SECRET: required when PDS_DB_POSTGRES_URL/)
    expect(() => loadConfig({ ...env, PDS_JWT_SECRET: 'x'.repeat(32) })).toThrowError(/^PDS_OAUTH_SIGNING_KEY: /)
  })

  it('generates secrets once into a 0600 file and reuses them on restart', () => {
    const env = base()
    const first = loadConfig(env)
    const file = join(env.PDS_DATA_DIRECTORY, 'secrets.json')
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(first.warnings.some((w) => w.includes('generated PDS_JWT_SECRET'))).toBe(true)
    const again = loadConfig(env)
    expect(again.secrets).toEqual(first.secrets)
    expect(again.warnings.some((w) => w.includes('generated'))).toBe(false)
    expect(JSON.parse(readFileSync(file, 'utf8')).jwtSecret).toBe(first.secrets.jwtSecret)
    expect(first.secrets.oauthSigningKey).toMatch(/^[0-9a-f]{64}$/)
  })

  it('prefers a secret from the environment over the file', () => {
    const env = base()
    loadConfig(env)
    expect(loadConfig({ ...env, PDS_JWT_SECRET: 'from-the-environment-123' }).secrets.jwtSecret).toBe('from-the-environment-123')
  })
})
