// What handlers may depend on. Each handler module takes only the members it uses.
import type { Keypair } from '@atproto/crypto'
import type { Config } from './config.js'
import type { Db } from './db/index.js'
import type { Logger } from './logger.js'
import type { TokenKeys } from './account/session-tokens.js'
import type { Firehose } from './sequencer/firehose.js'
import type { OAuthServices } from './oauth/index.js'
import type { Mailer } from './mail/index.js'
import type { BlobStore } from './blob/blobstore.js'
import type { Metrics } from './metrics.js'
import type { ImportHooks } from './move/import-repo.js'
import type { OutboundGuard } from './net/guard.js'
import type { DidResolver } from './identity/did-resolver.js'
import type { PasswordGuard } from './budgets.js'
import type { NotifySpacesDeleted, NotifyWrite } from './space/repo-write.js'

/** fault injection for tests (StartOptions.testHooks); never set in production */
export type TestHooks = { importRepo?: ImportHooks }

export type Services = {
  config: Config
  db: Db
  logger: Logger
  tokenKeys: TokenKeys
  /** the server's PLC rotation key (PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX) */
  rotationKey: Keypair
  firehose: Firehose
  /** OAuth signing key, issuer, DPoP replay store and client resolver */
  oauth: OAuthServices
  /** outgoing email, backend chosen at start */
  mailer: Mailer
  blobstore: BlobStore
  /** Prometheus counters; modules bump theirs (e.g. metrics.emailFailures.inc()) */
  metrics: Metrics
  /** requests to addresses a caller or a foreign document chose go through this */
  outbound: OutboundGuard
  /** other identities' DID documents (proxy targets, resolveIdentity), cached */
  didResolver: DidResolver
  /** the login budgets, for password checks that are not XRPC routes (sign-in form, admin Basic) */
  passwords: PasswordGuard
  /** tells a space's host of a committed write to a permissioned repo (best effort) */
  notifyWrite: NotifyWrite
  /** tells the syncers of the spaces an account's deletion took with it (best effort) */
  notifySpacesDeleted: NotifySpacesDeleted
  testHooks?: TestHooks
}
