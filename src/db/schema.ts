// Row types of the store. Timestamps are ISO 8601 strings and flags are 0/1 integers on both
// dialects, so rows read the same from SQLite and PostgreSQL.
import type { Generated } from 'kysely'

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

export interface AccountPrefTable {
  id: Generated<number>
  did: string
  name: string
  value_json: string
}

export interface Schema {
  account: AccountTable
  refresh_token: RefreshTokenTable
  plc_operation: PlcOperationTable
  signing_key: SigningKeyTable
  event: EventTable
  account_pref: AccountPrefTable
}
