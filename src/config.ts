// The only reader of process.env. Every PDS_* variable is parsed and validated here; a bad
// value stops the process with one line naming the variable.
import { randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { parseEnv } from 'node:util'
import { join, resolve } from 'node:path'
import { isValidDid } from '@atproto/syntax'
import { z } from 'zod/v4'
import { bool, color, hex64, int, key256, list, nameserver, proxyEntry, url } from './config-values.js'

// Values and shapes the settings are checked against; the modules that use them import them from here.
export const FLAVORS = ['generic', 'postmark', 'resend', 'sendgrid', 'mailgun', 'ses'] as const
export type Flavor = (typeof FLAVORS)[number]

/** where a provider takes messages when PDS_EMAIL_HTTP_URL is unset (Mailgun's URL names the domain) */
export const DEFAULT_URL: Partial<Record<Flavor, string>> = {
  postmark: 'https://api.postmarkapp.com/email',
  resend: 'https://api.resend.com/emails',
  sendgrid: 'https://api.sendgrid.com/v3/mail/send',
}

export const ACCOUNT_CREATION_MODES = ['open', 'invite', 'moving-in', 'closed'] as const
export type AccountCreation = (typeof ACCOUNT_CREATION_MODES)[number]

/** where an S3-compatible bucket is and how to sign in to it */
export type BucketConfig = {
  bucket: string
  region: string
  endpoint?: string
  forcePathStyle: boolean
  accessKeyId?: string
  secretAccessKey?: string
}

export type S3Config = BucketConfig & {
  /** each request that stores an upload's bytes (a part, the whole object, the copy) */
  uploadTimeoutMs: number
  /** every other request (reads, lookups, deletes, listings) until its answer's headers */
  requestTimeoutMs: number
  /** PDS_DNS_NAMESERVERS: the bucket's host is resolved there when set */
  nameservers?: string[]
}

export type BackupS3Config = BucketConfig & {
  /** '' or ends with '/' */
  prefix: string
  intervalHours: number
  keep: number
  /** AES-256-GCM key every uploaded object is sealed with */
  encryptionKey: Buffer
  /** a former key, still accepted when restoring (key rotation) */
  previousKey?: Buffer
  /** PDS_DNS_NAMESERVERS: the bucket's host is resolved there when set */
  nameservers?: string[]
}

export class ConfigError extends Error {}

export const COLOR_NAMES = [
  'primary',
  'primaryContrast',
  'error',
  'errorContrast',
  'warning',
  'warningContrast',
  'success',
  'successContrast',
  'light',
  'dark',
] as const
export type ColorName = (typeof COLOR_NAMES)[number]
const colorVar = (name: ColorName) =>
  `PDS_${name.replace(/[A-Z]/g, (c) => '_' + c).toUpperCase()}_COLOR`.replace(/_CONTRAST_COLOR$/, '_COLOR_CONTRAST')
function colorVars() {
  return Object.fromEntries(COLOR_NAMES.map((n) => [colorVar(n), color.optional()])) as Record<string, z.ZodOptional<typeof color>>
}

const vars = {
  PDS_PORT: int(0, 65535).default(2583),
  PDS_BIND: z.string().min(1).default('0.0.0.0'),
  PDS_HOSTNAME: z
    .string()
    .regex(/^[a-zA-Z0-9.-]+$/, 'must be a bare host name')
    .default('localhost'),
  PDS_DEV_MODE: bool.optional(),
  PDS_DNS_NAMESERVERS: list(nameserver).default([]),
  PDS_PUBLIC_URL: url.optional(),
  PDS_DATA_DIRECTORY: z.string().min(1).default('./data'),
  PDS_BLOBSTORE_DISK_LOCATION: z.string().min(1).optional(),
  PDS_DB_POSTGRES_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
  PDS_DB_POSTGRES_SCHEMA: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL identifier')
    .default('public'),
  PDS_JWT_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  PDS_OAUTH_SIGNING_KEY: hex64.optional(),
  PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX: hex64.optional(),
  PDS_DID_PLC_URL: z.union([z.literal('local'), url]).optional(),
  PDS_SERVICE_HANDLE_DOMAINS: z
    .string()
    .default('.test')
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^\.[a-z0-9.-]+[a-z0-9]$/, 'each domain must start with a dot')).min(1)),
  PDS_RESERVED_HANDLES: z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim().toLowerCase())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^[a-z0-9-]{1,63}$/, 'each name must be a single handle label')))
    .default([]),
  PDS_INVITE_REQUIRED: bool.default(false),
  PDS_ACCOUNT_CREATION: z.enum(ACCOUNT_CREATION_MODES).optional(),
  // HTTP Basic has no second factor: a short password falls to guessing from many addresses
  PDS_ADMIN_PASSWORD: z.string().min(16, 'must be at least 16 characters (or unset to turn the admin API off)').optional(),
  PDS_EMAIL_BACKEND: z.enum(['console', 'http-json']).default('console'),
  PDS_EMAIL_FROM: z.string().min(3).optional(),
  PDS_EMAIL_HTTP_URL: url.optional(),
  PDS_EMAIL_HTTP_TOKEN: z.string().min(1).optional(),
  PDS_EMAIL_HTTP_FLAVOR: z
    .enum([...FLAVORS, 'vendor'])
    .default('generic')
    .transform((v) => (v === 'vendor' ? 'postmark' : v)),
  PDS_EMAIL_HTTP_TIMEOUT_MS: int(1, 600_000).default(10_000),
  PDS_EMAIL_SES_REGION: z
    .string()
    .regex(/^[a-z]{2}(-[a-z]+)+-\d$/, 'must be an AWS region such as eu-west-1')
    .optional(),
  // the reference PDS's SMTP setting: read only to stop with a pointer to the HTTP providers
  PDS_EMAIL_SMTP_URL: z.string().optional(),
  PDS_DPOP_REPLAY_STORE: z
    .enum(['in-memory', 'redis', 'shared'])
    .default('in-memory')
    .transform((v) => (v === 'shared' ? 'redis' : v)),
  PDS_REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
  PDS_LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  PDS_RATE_LIMITS_ENABLED: bool.default(true),
  PDS_SPACES_ENABLED: bool.default(true),
  PDS_RATE_LIMIT_MULTIPLIER: z.coerce.number().positive().max(1_000_000).default(1),
  PDS_RATE_LIMIT_BYPASS_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  PDS_RATE_LIMIT_BYPASS_IPS: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    ),
  PDS_TRUST_PROXY: list(proxyEntry).default(['loopback']),
  PDS_CRAWLERS: list(url).default([]),
  PDS_BSKY_APP_VIEW_URL: url.optional(),
  PDS_BSKY_APP_VIEW_DID: z
    .string()
    .regex(/^did:[a-z]+:\S+$/, 'must be a DID')
    .optional(),
  // image URLs in views this server builds itself: format(pattern, kind, did, cid), as the AppView's CDN serves them
  PDS_BSKY_APP_VIEW_CDN_URL_PATTERN: z
    .string()
    .refine((s) => s.split('%s').length === 4, 'must hold three %s (image kind, DID, CID)')
    .optional(),
  PDS_MOD_SERVICE_URL: url.optional(),
  PDS_MOD_SERVICE_DID: z
    .string()
    .refine((s) => isValidDid(s), 'must be a DID')
    .optional(),
  PDS_REPORT_SERVICE_URL: url.optional(),
  PDS_REPORT_SERVICE_DID: z
    .string()
    .refine((s) => isValidDid(s), 'must be a DID')
    .optional(),
  PDS_SERVICE_AUTH_AUD_SERVICE_ID: bool.default(false),
  PDS_LEXICON_AUTHORITY_DID: z
    .string()
    .refine((s) => isValidDid(s), 'must be a DID')
    .optional(),
  PDS_METRICS: bool.default(false),
  PDS_METRICS_PORT: int(1, 65535).optional(),
  PDS_PROXY_TIMEOUT_MS: int(1, 600_000).default(30_000),
  PDS_PROXY_MAX_RESPONSE_BYTES: int(1, 2 ** 40).default(10 * 1024 * 1024),
  PDS_CRAWL_INTERVAL_MINUTES: int(1, 24 * 60).default(20),
  PDS_SEQ_FLOOR: int(0, Number.MAX_SAFE_INTEGER).default(0),
  PDS_FIREHOSE_RETENTION_HOURS: int(1, 24 * 365).default(72),
  PDS_FIREHOSE_CONNECTIONS_PER_ADDRESS: int(1, 1_000_000).default(16),
  PDS_BLOB_UPLOAD_LIMIT: int(1, 2 ** 40).default(104_857_600),
  PDS_BLOB_GRACE_SECONDS: int(0, 365 * 86_400).default(3600),
  PDS_BLOBSTORE_S3_BUCKET: z.string().min(3).optional(),
  PDS_BLOBSTORE_S3_REGION: z.string().min(1).default('us-east-1'),
  PDS_BLOBSTORE_S3_ENDPOINT: url.optional(),
  PDS_BLOBSTORE_S3_FORCE_PATH_STYLE: bool.default(false),
  PDS_BLOBSTORE_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  PDS_BLOBSTORE_S3_UPLOAD_TIMEOUT_MS: int(1, 3_600_000).default(20_000),
  PDS_BLOBSTORE_S3_TIMEOUT_MS: int(1, 600_000).default(10_000),
  PDS_BACKUP_S3_BUCKET: z.string().min(3).optional(),
  PDS_BACKUP_ENCRYPTION_KEY: key256.optional(),
  PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS: key256.optional(),
  PDS_BACKUP_S3_REGION: z.string().min(1).default('us-east-1'),
  PDS_BACKUP_S3_ENDPOINT: url.optional(),
  PDS_BACKUP_S3_FORCE_PATH_STYLE: bool.default(false),
  PDS_BACKUP_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  PDS_BACKUP_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  PDS_BACKUP_S3_PREFIX: z
    .string()
    .regex(/^([^/].*\/)?$/, 'must end with / and not start with one (or be empty)')
    .default('backups/'),
  PDS_BACKUP_INTERVAL_HOURS: int(1, 24 * 365).default(24),
  PDS_BACKUP_KEEP: int(1, 10_000).default(7),
  PDS_PRIVACY_POLICY_URL: url.optional(),
  PDS_TERMS_OF_SERVICE_URL: url.optional(),
  PDS_CONTACT_EMAIL_ADDRESS: z.email().optional(),
  // branding, under the reference PDS's names: every page and email shows them
  PDS_SERVICE_NAME: z
    .string()
    .max(100, 'must be at most 100 characters')
    .regex(/^[^<>\n\r]+$/, 'must be one line of text without < or >')
    .optional(),
  PDS_LOGO_URL: url.optional(),
  PDS_HOME_URL: url.optional(),
  PDS_SUPPORT_URL: url.optional(),
  ...colorVars(),
  // read by runtimeEnv() before the rest; listed here so a bad value is reported like any other
  PDS_RUNTIME_TUNING: bool.default(true),
} as const

type Vars = { [K in keyof typeof vars]: z.output<(typeof vars)[K]> }

export type Config = {
  port: number
  bind: string
  hostname: string
  /** http and private addresses allowed for outgoing requests a caller or a foreign document chose */
  devMode: boolean
  /** `ip[:port]` servers every DNS lookup goes to; empty = the system's resolver */
  dnsNameservers: string[]
  serviceDid: string
  publicUrl: string
  dataDir: string
  blobDir: string
  /** set: blobs live in this bucket instead of blobDir */
  blobS3?: S3Config
  /** how long an unreferenced upload is kept before the sweeper removes it */
  blobGraceMs: number
  /** set: the server uploads a backup to this bucket every interval and keeps the newest `keep` */
  backupS3?: BackupS3Config
  db: { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string; schema: string }
  secrets: Secrets
  /** the PLC directory; unset = the local operation log (development) */
  plcUrl?: string
  handleDomains: string[]
  /** first labels nobody may take on the service domains, besides the built-in ones */
  reservedHandles: string[]
  /** who may create an account here: everyone, with an invite, accounts moving in only, or nobody but the operator */
  accountCreation: AccountCreation
  /** accountCreation is `invite` */
  inviteRequired: boolean
  adminPassword?: string
  email:
    | { backend: 'console'; from: string }
    | {
        backend: 'http-json'
        from: string
        url: string
        token: string
        flavor: Flavor
        timeoutMs: number
        sesRegion?: string
      }
  dpopReplayStore: 'in-memory' | 'redis'
  redisUrl?: string
  logLevel: string
  rateLimitsEnabled: boolean
  /** permissioned data (com.atproto.space.*, com.atproto.simplespace.*); off: every such method answers 501 */
  spacesEnabled: boolean
  /** points of every rate limit are multiplied by this (operators raise limits with it) */
  rateLimitMultiplier: number
  /** a request with `x-ratelimit-bypass: <key>` skips rate limits (a trusted frontend) */
  rateLimitBypassKey?: string
  rateLimitBypassIps: string[]
  /** express `trust proxy`: whose X-Forwarded-For is believed for the client address */
  trustProxy: string[]
  crawlers: string[]
  appView?: { url: string; did: string; cdnUrlPattern?: string }
  /** the moderation service (Ozone): its tokens reach the moderator methods; reports go there */
  modService?: { url: string; did: string }
  /** where createReport goes without an atproto-proxy header (defaults to the moderation service) */
  reportService?: { url: string; did: string }
  /** outgoing proxy tokens name the service as `did#serviceId` in `aud` instead of the bare DID */
  serviceAuthAudServiceId: boolean
  /** set: the DID that publishes every lexicon (permission sets), instead of each NSID's DNS authority */
  lexiconAuthorityDid?: string
  metrics: boolean
  /** serve /metrics on this port (on PDS_BIND) instead of the main one */
  metricsPort?: number
  proxy: { timeoutMs: number; maxResponseBytes: number }
  /** a write after this many quiet minutes asks the relays to crawl again */
  crawlIntervalMinutes: number
  /** the firehose's next seq is above this (PDS_SEQ_FLOOR; 0 = no floor) */
  seqFloor: number
  firehoseRetentionHours: number
  /** subscribeRepos streams one client address may hold open at once */
  firehoseConnectionsPerAddress: number
  blobUploadLimit: number
  links: { privacyPolicy?: string; termsOfService?: string; contactEmail?: string }
  /** what pages and emails show about the service (name, logo, colours, links) */
  branding: Branding
  /** warnings to log once the logger exists (generated secrets, console email) */
  warnings: string[]
}

export type Branding = {
  name: string
  logoUrl?: string
  homeUrl?: string
  supportUrl?: string
  privacyPolicyUrl?: string
  termsOfServiceUrl?: string
  colors: Partial<Record<ColorName, string>>
}

export type Secrets = { jwtSecret: string; oauthSigningKey: string; plcRotationKey: string }

const SECRETS = new Set([
  'PDS_BACKUP_ENCRYPTION_KEY',
  'PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS',
  'PDS_BACKUP_S3_SECRET_ACCESS_KEY',
  'PDS_JWT_SECRET',
  'PDS_OAUTH_SIGNING_KEY',
  'PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX',
  'PDS_ADMIN_PASSWORD',
  'PDS_EMAIL_HTTP_TOKEN',
  'PDS_RATE_LIMIT_BYPASS_KEY',
  'PDS_EMAIL_SMTP_URL',
])

function parseVars(env: NodeJS.ProcessEnv): Vars {
  const out: Record<string, unknown> = {}
  for (const [name, schema] of Object.entries(vars)) {
    const raw = env[name]
    const r = (schema as z.ZodType).safeParse(raw === '' ? undefined : raw)
    if (!r.success) {
      const why = r.error.issues[0]?.message ?? 'invalid'
      // a secret's value would end up in logs: say only how long it was
      const got = raw === undefined ? 'nothing' : SECRETS.has(name) ? `${raw.length} characters` : JSON.stringify(raw)
      throw new ConfigError(`${name}: ${why} (got ${got})`)
    }
    out[name] = r.data
  }
  return out as Vars
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const v = parseVars(env)
  const warnings: string[] = []
  const dataDir = resolve(v.PDS_DATA_DIRECTORY)
  const publicUrl = (
    v.PDS_PUBLIC_URL ?? (v.PDS_HOSTNAME === 'localhost' ? `http://localhost:${v.PDS_PORT}` : `https://${v.PDS_HOSTNAME}`)
  ).replace(/\/+$/, '')

  if (!v.PDS_BLOBSTORE_S3_ACCESS_KEY_ID !== !v.PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY) {
    throw new ConfigError('PDS_BLOBSTORE_S3_ACCESS_KEY_ID and PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY go together')
  }
  if (!v.PDS_BACKUP_S3_ACCESS_KEY_ID !== !v.PDS_BACKUP_S3_SECRET_ACCESS_KEY) {
    throw new ConfigError('PDS_BACKUP_S3_ACCESS_KEY_ID and PDS_BACKUP_S3_SECRET_ACCESS_KEY go together')
  }
  // a backup holds every signing key and password hash: it leaves the machine encrypted or not at all
  if (v.PDS_BACKUP_S3_BUCKET && !v.PDS_BACKUP_ENCRYPTION_KEY) {
    throw new ConfigError('PDS_BACKUP_ENCRYPTION_KEY: required with PDS_BACKUP_S3_BUCKET, 32 bytes (openssl rand -hex 32)')
  }
  if (!v.PDS_BACKUP_S3_BUCKET) {
    // a retention or schedule setting without a bucket would silently back up nothing
    const stray = Object.keys(env).find((k) => /^PDS_BACKUP_(S3_|INTERVAL_HOURS$|KEEP$|ENCRYPTION_KEY)/.test(k) && env[k])
    if (stray) throw new ConfigError(`${stray}: set PDS_BACKUP_S3_BUCKET too, or unset it`)
  }
  if (v.PDS_EMAIL_SMTP_URL) {
    throw new ConfigError(
      'PDS_EMAIL_SMTP_URL: SMTP is not supported; set PDS_EMAIL_BACKEND=http-json with PDS_EMAIL_HTTP_FLAVOR ' +
        `(${FLAVORS.join(', ')}), PDS_EMAIL_HTTP_TOKEN and PDS_EMAIL_FROM instead, and unset PDS_EMAIL_SMTP_URL`,
    )
  }
  const emailUrl = v.PDS_EMAIL_HTTP_URL ?? DEFAULT_URL[v.PDS_EMAIL_HTTP_FLAVOR]
  if (v.PDS_EMAIL_BACKEND === 'http-json') {
    if (!emailUrl)
      throw new ConfigError(`PDS_EMAIL_HTTP_URL: required when PDS_EMAIL_BACKEND is http-json with the ${v.PDS_EMAIL_HTTP_FLAVOR} flavor`)
    for (const name of ['PDS_EMAIL_HTTP_TOKEN', 'PDS_EMAIL_FROM'] as const) {
      if (!v[name]) throw new ConfigError(`${name}: required when PDS_EMAIL_BACKEND is http-json`)
    }
    if (v.PDS_EMAIL_HTTP_FLAVOR === 'ses' && !v.PDS_EMAIL_HTTP_TOKEN!.includes(':')) {
      throw new ConfigError('PDS_EMAIL_HTTP_TOKEN: with the ses flavor it is ACCESS_KEY_ID:SECRET_ACCESS_KEY')
    }
  } else {
    warnings.push('PDS_EMAIL_BACKEND is console: outgoing email, tokens included, is printed to the log and not sent')
  }
  if (v.PDS_DPOP_REPLAY_STORE === 'redis' && !v.PDS_REDIS_URL) {
    throw new ConfigError('PDS_REDIS_URL: required when PDS_DPOP_REPLAY_STORE is redis')
  }
  if (!!v.PDS_BSKY_APP_VIEW_URL !== !!v.PDS_BSKY_APP_VIEW_DID) {
    const missing = v.PDS_BSKY_APP_VIEW_URL ? 'PDS_BSKY_APP_VIEW_DID' : 'PDS_BSKY_APP_VIEW_URL'
    throw new ConfigError(`${missing}: PDS_BSKY_APP_VIEW_URL and PDS_BSKY_APP_VIEW_DID go together`)
  }
  for (const kind of ['MOD', 'REPORT'] as const) {
    const [u, d] = [`PDS_${kind}_SERVICE_URL`, `PDS_${kind}_SERVICE_DID`] as const
    if (!!v[u] !== !!v[d]) throw new ConfigError(`${v[u] ? d : u}: ${u} and ${d} go together`)
  }

  // PDS_INVITE_REQUIRED=true is the older spelling of PDS_ACCOUNT_CREATION=invite
  const accountCreation = v.PDS_ACCOUNT_CREATION ?? (v.PDS_INVITE_REQUIRED ? 'invite' : 'open')
  if (env.PDS_INVITE_REQUIRED !== undefined && v.PDS_INVITE_REQUIRED !== (accountCreation === 'invite')) {
    throw new ConfigError(
      `PDS_INVITE_REQUIRED: ${env.PDS_INVITE_REQUIRED} contradicts PDS_ACCOUNT_CREATION=${accountCreation}; set PDS_ACCOUNT_CREATION alone`,
    )
  }

  const devMode = v.PDS_DEV_MODE ?? /(^|\.)localhost$/i.test(v.PDS_HOSTNAME)
  // outside development mode the server joins the public network unless told otherwise
  const plcUrl = v.PDS_DID_PLC_URL === 'local' ? undefined : (v.PDS_DID_PLC_URL ?? (devMode ? undefined : 'https://plc.directory'))
  if (v.PDS_DID_PLC_URL === 'local' && !devMode) {
    warnings.push("PDS_DID_PLC_URL is local: DIDs live in this server's own log, which nobody else on the network can resolve")
  }
  // an empty PDS_CRAWLERS (set, but to nothing) turns crawl requests off
  const crawlers = env.PDS_CRAWLERS === undefined && !devMode ? ['https://bsky.network'] : v.PDS_CRAWLERS

  const secrets = v.PDS_DB_POSTGRES_URL ? secretsFromEnv(v) : secretsWithFile(v, dataDir, warnings)

  return {
    port: v.PDS_PORT,
    bind: v.PDS_BIND,
    hostname: v.PDS_HOSTNAME,
    devMode,
    dnsNameservers: v.PDS_DNS_NAMESERVERS,
    serviceDid: `did:web:${v.PDS_HOSTNAME}`,
    publicUrl,
    dataDir,
    blobDir: resolve(v.PDS_BLOBSTORE_DISK_LOCATION ?? join(dataDir, 'blobs')),
    blobS3: v.PDS_BLOBSTORE_S3_BUCKET
      ? {
          bucket: v.PDS_BLOBSTORE_S3_BUCKET,
          region: v.PDS_BLOBSTORE_S3_REGION,
          endpoint: v.PDS_BLOBSTORE_S3_ENDPOINT,
          forcePathStyle: v.PDS_BLOBSTORE_S3_FORCE_PATH_STYLE,
          accessKeyId: v.PDS_BLOBSTORE_S3_ACCESS_KEY_ID,
          secretAccessKey: v.PDS_BLOBSTORE_S3_SECRET_ACCESS_KEY,
          uploadTimeoutMs: v.PDS_BLOBSTORE_S3_UPLOAD_TIMEOUT_MS,
          requestTimeoutMs: v.PDS_BLOBSTORE_S3_TIMEOUT_MS,
          nameservers: v.PDS_DNS_NAMESERVERS,
        }
      : undefined,
    blobGraceMs: v.PDS_BLOB_GRACE_SECONDS * 1000,
    backupS3: v.PDS_BACKUP_S3_BUCKET
      ? {
          bucket: v.PDS_BACKUP_S3_BUCKET,
          region: v.PDS_BACKUP_S3_REGION,
          endpoint: v.PDS_BACKUP_S3_ENDPOINT,
          forcePathStyle: v.PDS_BACKUP_S3_FORCE_PATH_STYLE,
          accessKeyId: v.PDS_BACKUP_S3_ACCESS_KEY_ID,
          secretAccessKey: v.PDS_BACKUP_S3_SECRET_ACCESS_KEY,
          prefix: v.PDS_BACKUP_S3_PREFIX,
          intervalHours: v.PDS_BACKUP_INTERVAL_HOURS,
          keep: v.PDS_BACKUP_KEEP,
          encryptionKey: v.PDS_BACKUP_ENCRYPTION_KEY!,
          previousKey: v.PDS_BACKUP_ENCRYPTION_KEY_PREVIOUS,
          nameservers: v.PDS_DNS_NAMESERVERS,
        }
      : undefined,
    db: v.PDS_DB_POSTGRES_URL
      ? { kind: 'postgres', url: v.PDS_DB_POSTGRES_URL, schema: v.PDS_DB_POSTGRES_SCHEMA }
      : { kind: 'sqlite', file: join(dataDir, 'pds.sqlite') },
    secrets,
    plcUrl: plcUrl?.replace(/\/+$/, ''),
    handleDomains: v.PDS_SERVICE_HANDLE_DOMAINS,
    reservedHandles: v.PDS_RESERVED_HANDLES,
    accountCreation,
    inviteRequired: accountCreation === 'invite',
    adminPassword: v.PDS_ADMIN_PASSWORD,
    email:
      v.PDS_EMAIL_BACKEND === 'http-json'
        ? {
            backend: 'http-json',
            from: v.PDS_EMAIL_FROM!,
            url: emailUrl!,
            token: v.PDS_EMAIL_HTTP_TOKEN!,
            flavor: v.PDS_EMAIL_HTTP_FLAVOR,
            timeoutMs: v.PDS_EMAIL_HTTP_TIMEOUT_MS,
            sesRegion: v.PDS_EMAIL_SES_REGION,
          }
        : { backend: 'console', from: v.PDS_EMAIL_FROM ?? `noreply@${v.PDS_HOSTNAME}` },
    dpopReplayStore: v.PDS_DPOP_REPLAY_STORE,
    redisUrl: v.PDS_REDIS_URL,
    logLevel: v.PDS_LOG_LEVEL,
    rateLimitsEnabled: v.PDS_RATE_LIMITS_ENABLED,
    spacesEnabled: v.PDS_SPACES_ENABLED,
    rateLimitMultiplier: v.PDS_RATE_LIMIT_MULTIPLIER,
    rateLimitBypassKey: v.PDS_RATE_LIMIT_BYPASS_KEY,
    rateLimitBypassIps: v.PDS_RATE_LIMIT_BYPASS_IPS,
    trustProxy: v.PDS_TRUST_PROXY,
    crawlers,
    appView: v.PDS_BSKY_APP_VIEW_URL
      ? {
          url: v.PDS_BSKY_APP_VIEW_URL.replace(/\/+$/, ''),
          did: v.PDS_BSKY_APP_VIEW_DID!,
          cdnUrlPattern: v.PDS_BSKY_APP_VIEW_CDN_URL_PATTERN,
        }
      : undefined,
    modService: v.PDS_MOD_SERVICE_URL ? { url: v.PDS_MOD_SERVICE_URL.replace(/\/+$/, ''), did: v.PDS_MOD_SERVICE_DID! } : undefined,
    reportService: v.PDS_REPORT_SERVICE_URL
      ? { url: v.PDS_REPORT_SERVICE_URL.replace(/\/+$/, ''), did: v.PDS_REPORT_SERVICE_DID! }
      : undefined,
    serviceAuthAudServiceId: v.PDS_SERVICE_AUTH_AUD_SERVICE_ID,
    lexiconAuthorityDid: v.PDS_LEXICON_AUTHORITY_DID,
    metrics: v.PDS_METRICS || v.PDS_METRICS_PORT !== undefined,
    metricsPort: v.PDS_METRICS_PORT,
    proxy: { timeoutMs: v.PDS_PROXY_TIMEOUT_MS, maxResponseBytes: v.PDS_PROXY_MAX_RESPONSE_BYTES },
    crawlIntervalMinutes: v.PDS_CRAWL_INTERVAL_MINUTES,
    seqFloor: v.PDS_SEQ_FLOOR,
    firehoseRetentionHours: v.PDS_FIREHOSE_RETENTION_HOURS,
    firehoseConnectionsPerAddress: v.PDS_FIREHOSE_CONNECTIONS_PER_ADDRESS,
    blobUploadLimit: v.PDS_BLOB_UPLOAD_LIMIT,
    links: {
      privacyPolicy: v.PDS_PRIVACY_POLICY_URL,
      termsOfService: v.PDS_TERMS_OF_SERVICE_URL,
      contactEmail: v.PDS_CONTACT_EMAIL_ADDRESS,
    },
    branding: {
      name: v.PDS_SERVICE_NAME?.trim() || new URL(publicUrl).host,
      logoUrl: v.PDS_LOGO_URL,
      homeUrl: v.PDS_HOME_URL,
      supportUrl: v.PDS_SUPPORT_URL,
      privacyPolicyUrl: v.PDS_PRIVACY_POLICY_URL,
      termsOfServiceUrl: v.PDS_TERMS_OF_SERVICE_URL,
      colors: Object.fromEntries(
        COLOR_NAMES.flatMap((n) => {
          const c = (v as Record<string, unknown>)[colorVar(n)]
          return typeof c === 'string' ? [[n, c.toLowerCase()]] : []
        }),
      ),
    },
    warnings,
  }
}

// with a shared database every process must agree on the secrets, so none is
// generated.
function secretsFromEnv(v: Vars): Secrets {
  const need = ['PDS_JWT_SECRET', 'PDS_OAUTH_SIGNING_KEY', 'PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX'] as const
  for (const name of need) {
    if (!v[name]) throw new ConfigError(`${name}: required when PDS_DB_POSTGRES_URL is set (every process must share it)`)
  }
  return {
    jwtSecret: v.PDS_JWT_SECRET!,
    oauthSigningKey: v.PDS_OAUTH_SIGNING_KEY!.toLowerCase(),
    plcRotationKey: v.PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX!.toLowerCase(),
  }
}

function secretsWithFile(v: Vars, dataDir: string, warnings: string[]): Secrets {
  const file = join(dataDir, 'secrets.json')
  let stored: Partial<Secrets> = {}
  if (existsSync(file)) {
    try {
      stored = JSON.parse(readFileSync(file, 'utf8'))
    } catch {
      throw new ConfigError(`PDS_DATA_DIRECTORY: ${file} is not valid JSON; fix or remove it`)
    }
  }
  const fromEnv: Partial<Secrets> = {
    jwtSecret: v.PDS_JWT_SECRET,
    oauthSigningKey: v.PDS_OAUTH_SIGNING_KEY?.toLowerCase(),
    plcRotationKey: v.PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX?.toLowerCase(),
  }
  const generated: string[] = []
  const pick = (key: keyof Secrets, envName: string, make: () => string) => {
    if (fromEnv[key]) return fromEnv[key]
    if (stored[key]) return stored[key]
    generated.push(envName)
    stored[key] = make()
    return stored[key]
  }
  const secrets: Secrets = {
    jwtSecret: pick('jwtSecret', 'PDS_JWT_SECRET', () => randomBytes(32).toString('hex')),
    oauthSigningKey: pick('oauthSigningKey', 'PDS_OAUTH_SIGNING_KEY', k256Scalar),
    plcRotationKey: pick('plcRotationKey', 'PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX', k256Scalar),
  }
  if (generated.length) {
    // whole or not at all: a file cut short by a full disk would stop every later start
    const tmp = `${file}.${process.pid}.tmp`
    try {
      mkdirSync(dataDir, { recursive: true, mode: 0o700 })
      writeFileSync(tmp, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 })
      chmodSync(tmp, 0o600)
      renameSync(tmp, file)
    } catch (err) {
      rmSync(tmp, { force: true })
      const e = err as NodeJS.ErrnoException
      e.path ??= file
      throw e
    }
    warnings.push(`generated ${generated.join(', ')} into ${file}; set them in the environment for production`)
  }
  return secrets
}

// A uniformly random 32-byte value is a valid secp256k1 scalar except with negligible probability
// (>= the group order or zero); reject those so the key always loads.
const K256_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n
function k256Scalar(): string {
  for (;;) {
    const hex = randomBytes(32).toString('hex')
    const n = BigInt('0x' + hex)
    if (n > 0n && n < K256_ORDER) return hex
  }
}

/** set in the environment of a server process that re-executed itself with the tuning (runtime.ts) */
export const RUNTIME_TUNED_VAR = 'PDS_RUNTIME_TUNED'

export type RuntimeEnv = {
  /** this process is the re-executed one */
  tuned: boolean
  /** PDS_RUNTIME_TUNING is not false */
  enabled: boolean
  /** NODE_OPTIONS, whose flags the operator's choice wins over ours */
  nodeOptions: string
  /** the environment to pass on */
  env: NodeJS.ProcessEnv
}

/** what src/runtime.ts needs before the configuration is loaded (loading it may write secrets) */
export function runtimeEnv(env: NodeJS.ProcessEnv = process.env): RuntimeEnv {
  return {
    tuned: env[RUNTIME_TUNED_VAR] === '1',
    enabled: env.PDS_RUNTIME_TUNING !== 'false' && env.PDS_RUNTIME_TUNING !== '0',
    nodeOptions: env.NODE_OPTIONS ?? '',
    env,
  }
}

/** where the service's environment lives on a systemd install (deploy/pds.service) */
export const DEFAULT_ENV_FILE = '/etc/pds/pds.env'

/**
 * The environment the operator CLI works with: the service's environment file (`--env-file`,
 * else PDS_ENV_FILE, else /etc/pds/pds.env when it exists; PDS_ENV_FILE set but empty = none),
 * with variables set in the CLI's own environment over it, as Docker's and dotenv's files work.
 */
export function cliEnv(envFile?: string, env: NodeJS.ProcessEnv = process.env): { env: NodeJS.ProcessEnv; file?: string } {
  const chosen =
    envFile ??
    (env.PDS_ENV_FILE !== undefined ? env.PDS_ENV_FILE || undefined : existsSync(DEFAULT_ENV_FILE) ? DEFAULT_ENV_FILE : undefined)
  if (!chosen) return { env }
  let text: string
  try {
    text = readFileSync(chosen, 'utf8')
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? "permission denied (run as root or the service's user)" : code
    throw new ConfigError(`environment file ${chosen}: ${why}`)
  }
  return { env: { ...parseEnv(text), ...env }, file: resolve(chosen) }
}

/** what `pds migrate` reads from the environment: the password (never an argument) and the PLC directory */
export function migrateEnv(env: NodeJS.ProcessEnv = process.env) {
  return {
    password: env.PDS_MIGRATE_PASSWORD || undefined,
    plcUrl: env.PDS_DID_PLC_URL || 'https://plc.directory',
  }
}
