// Row types of the store. Timestamps are ISO 8601 strings and flags are 0/1 integers on both
// dialects, so rows read the same from SQLite and PostgreSQL.
import type { Generated, Kysely } from 'kysely'

export type AccountStatus = 'active' | 'deactivated' | 'takendown' | 'deleted'
export type MigrationState = 'none' | 'migrating-out' | 'migrating-in'

export interface AccountTable {
  did: string
  handle: string
  email: string | null
  email_confirmed_at: string | null
  password_hash: string | null
  status: AccountStatus
  migration_state: MigrationState
  created_at: string
  status_changed_at: string | null
  takedown_ref: string | null
  invites_disabled: number
  /** base64 scrypt salt shared by the account's app passwords (null until the first one) */
  app_password_salt: Generated<string | null>
  invite_note: Generated<string | null>
  /** migrating-out: the destination DID the migration token is for (migration 006) */
  migration_destination?: Generated<string | null>
  /** tokens naming another generation are dead: bumped when the password changes (migration 007) */
  credential_gen: Generated<number>
  /** JSON list of app passwords revoked within an access token's lifetime (migration 007) */
  revoked_app_passwords: Generated<string | null>
  /** 1: a password sign-in also needs a code mailed to the confirmed address (migration 013) */
  email_auth_factor: Generated<number>
  /** JSON list of the DPoP keys of OAuth grants ended within an access token's lifetime (migration 014) */
  revoked_grants: Generated<string | null>
}

export interface SignInCodeTable {
  did: string
  code_hash: string
  expires_at: string
  failures: Generated<number>
  sends: number
  window_started_at: string
}

export interface TotpTable {
  did: string
  /** the secret sealed with a key derived from the server's JWT secret */
  secret_sealed: string
  confirmed_at: string | null
  last_step: number | null
  created_at: string
}

export interface RecoveryCodeTable {
  did: string
  code_hash: string
  used_at: string | null
  created_at: string
}

export interface PasskeyTable {
  /** base64url, as WebAuthn's JSON forms carry it */
  credential_id: string
  did: string
  /** base64url of the COSE public key */
  public_key: string
  counter: number
  /** JSON list of transport hints */
  transports: string
  name: string
  backed_up: Generated<number>
  created_at: string
  last_used_at: string | null
  /** the account's credential_gen when the passkey was added or last used with the password */
  confirmed_gen: number | null
}

export interface WebauthnChallengeTable {
  challenge: string
  purpose: 'register' | 'authenticate'
  did: string | null
  expires_at: string
}

export interface RefreshTokenTable {
  jti: string
  did: string
  expires_at: string
  app_password_name: string | null
  kind: 'session' | 'oauth'
  dpop_jkt: string | null
  scope: string | null
  created_at: string
  /** OAuth records: the client the token was issued to (migration 004) */
  client_id?: string | null
  /** OAuth records: jti of the access token minted alongside (migration 004) */
  access_jti?: string | null
}

export interface PlcOperationTable {
  did: string
  seq: number
  cid: string
  operation: string
  created_at: string
}

export interface SigningKeyTable {
  did: string
  private_key_hex: string
  public_key_multibase: string
}

export interface EventTable {
  seq: Generated<number>
  type: 'commit' | 'sync' | 'identity' | 'account' | 'tombstone'
  did: string
  payload: Uint8Array
  sequenced_at: string
}

export interface OAuthRequestTable {
  request_uri: string
  client_id: string
  redirect_uri: string
  scope: string
  state: string
  code_challenge: string
  code_challenge_method: string
  dpop_jkt: string
  login_hint: string | null
  /** the client's OAuth prompt (none, login, consent, select_account, create) */
  prompt: string | null
  expires_at: string
  created_at: string
}

export interface OAuthCodeTable {
  code: string
  did: string
  client_id: string
  redirect_uri: string
  scope: string
  code_challenge: string
  dpop_jkt: string
  used: number
  expires_at: string
  created_at: string
}

export interface AppPasswordTable {
  did: string
  name: string
  password_hash: string
  privileged: number
  created_at: string
}

export type EmailTokenPurpose = 'confirm-email' | 'update-email' | 'reset-password' | 'delete-account' | 'plc-operation-signature'

export interface EmailTokenTable {
  did: string
  purpose: EmailTokenPurpose
  token: string
  new_email: string | null
  expires_at: string
  created_at: string
}

export interface InviteCodeTable {
  code: string
  use_count: number
  remaining: number
  disabled: number
  for_account: string
  created_by: string
  created_at: string
}

export interface InviteCodeUseTable {
  code: string
  used_by: string
  used_at: string
}

export interface RepoRootTable {
  did: string
  cid: string
  rev: string
  indexed_at: string
  block_count: number
  record_count: number
}

export interface RepoBlockTable {
  did: string
  cid: string
  repo_rev: string
  size: number
  content: Uint8Array
  /** a record value's block: how many records of the repository have that value; otherwise 1 */
  refs: Generated<number>
}

export interface RecordTable {
  uri: string
  did: string
  collection: string
  rkey: string
  cid: string
  rev: string
  indexed_at: string
  /** the moderation reference while taken down (migration 007); null otherwise */
  takedown_ref?: Generated<string | null>
  /** the value as the JSON text reads send (repo/record-json.ts); null for records from before it was kept */
  value_json?: string | null
}

export interface RecordBlobTable {
  did: string
  blob_cid: string
  record_uri: string
}

export interface BlobTable {
  did: string
  cid: string
  mime_type: string
  size: number
  referenced: number
  created_at: string
  /** the moderation reference while taken down (migration 007); null otherwise */
  takedown_ref?: Generated<string | null>
  /** the value as the JSON text reads send (repo/record-json.ts); null for records from before it was kept */
  value_json?: string | null
}

/** reserveSigningKey: keyed by DID, no link to an account; consumed by createAccount */
export interface ReservedSigningKeyTable {
  did: string
  private_key_hex: string
  public_key_multibase: string
  created_at: string
}

export interface AccountPrefTable {
  id: Generated<number>
  did: string
  name: string
  value_json: string
}

export interface DeviceTable {
  id: string
  /** SHA-256 of the cookie's secret; the secret itself is never stored */
  secret_hash: string
  created_at: string
  last_seen_at: string
}

export interface DeviceAccountTable {
  device_id: string
  did: string
  /** 1: listed on the device and kept signed in; 0: counts for one visit only */
  remember: number
  authenticated_at: string
  created_at: string
  /** equal to authenticated_at when that sign-in included a second factor (migration 015) */
  factor_at: string | null
  /** the account's credential_gen at that sign-in: a later password change or reset ends it (migration 018) */
  credential_gen: number | null
  /** when a password was last given for the account on this device; a passkey alone leaves it */
  password_at: string | null
}

/** a correct password waiting for its second factor on one device, for one authorization request */
export interface SignInStepTable {
  device_id: string
  request_uri: string
  did: string
  remember: number
  failures: number
  mailed_at: string | null
  created_at: string
  expires_at: string
  /** the account's credential_gen when the step was held: a password change in between ends it */
  credential_gen: Generated<number>
  /** 'factor': a password was given, a second factor is awaited; 'password': a passkey was given
   *  whose last confirmation predates a password change, the password is awaited */
  awaits: Generated<string>
  /** the passkey of an `awaits: 'password'` step */
  passkey_id: string | null
}

/** a permissioned repo: one account's records in one space (Spaces) */
export interface SpaceRepoTable {
  space: string
  did: string
  authority: string
  type: string
  rev: string
  /** the 2048-byte LtHash state */
  state: Uint8Array
  created_at: string
}

export interface SpaceRecordTable {
  space: string
  did: string
  collection: string
  rkey: string
  cid: string
  rev: string
  /** the record's DAG-CBOR block */
  value: Uint8Array
}

/** the operation log of a permissioned repo: `cid` null for a delete, `prev` null for a create */
export interface SpaceOpTable {
  space: string
  did: string
  rev: string
  idx: number
  collection: string
  rkey: string
  cid: string | null
  prev: string | null
}

export interface SpaceRecordBlobTable {
  space: string
  did: string
  collection: string
  rkey: string
  blob_cid: string
  /** the rev of the write that referenced it (listBlobs `since`) */
  rev: string
}

/** a space governed by a local authority (simplespace): its policies, or a tombstone once deleted */
export interface SpaceConfigTable {
  space: string
  authority: string
  type: string
  /** JSON of the user-policy union, with its $type */
  policy: string
  /** JSON of the app-access union, with its $type */
  app_access: string
  created_at: string
  deleted_at: string | null
}

export interface SpaceMemberTable {
  space: string
  did: string
}

/** the writer set of a space, as write notifications reported it */
export interface SpaceWriterTable {
  space: string
  did: string
  rev: string
  /** SHA-256 of the writer's LtHash state */
  hash: Uint8Array
}

/** a syncer registered for a space's notifications (a service identifier) */
export interface SpaceNotifyTable {
  space: string
  service: string
  expires_at: string
}

export interface Schema {
  device: DeviceTable
  device_account: DeviceAccountTable
  sign_in_step: SignInStepTable
  account_pref: AccountPrefTable
  account: AccountTable
  refresh_token: RefreshTokenTable
  plc_operation: PlcOperationTable
  signing_key: SigningKeyTable
  event: EventTable
  oauth_request: OAuthRequestTable
  oauth_code: OAuthCodeTable
  app_password: AppPasswordTable
  email_token: EmailTokenTable
  invite_code: InviteCodeTable
  invite_code_use: InviteCodeUseTable
  repo_root: RepoRootTable
  repo_block: RepoBlockTable
  record: RecordTable
  record_blob: RecordBlobTable
  blob: BlobTable
  reserved_signing_key: ReservedSigningKeyTable
  sign_in_code: SignInCodeTable
  totp: TotpTable
  recovery_code: RecoveryCodeTable
  passkey: PasskeyTable
  webauthn_challenge: WebauthnChallengeTable
  space_repo: SpaceRepoTable
  space_record: SpaceRecordTable
  space_op: SpaceOpTable
  space_record_blob: SpaceRecordBlobTable
  space_config: SpaceConfigTable
  space_member: SpaceMemberTable
  space_writer: SpaceWriterTable
  space_notify: SpaceNotifyTable
}

/**
 * the database (db/store.ts) or a transaction on it: what every query helper runs on, the parts
 * of Kysely's query builder both offer
 */
export type Store = Pick<
  Kysely<Schema>,
  'selectFrom' | 'selectNoFrom' | 'insertInto' | 'updateTable' | 'deleteFrom' | 'with' | 'fn' | 'executeQuery' | 'getExecutor'
>
