// Who may create an account on this server (PDS_ACCOUNT_CREATION), one rule for every way in:
// XRPC createAccount, the OAuth sign-up page, and accounts moving in with their DID. The
// operator's own paths (the CLI, createAccount with admin Basic) are not subject to it.
import type { AccountCreation } from '../config.js'
import { xrpcError } from '../errors.js'

/** a brand-new identity, or an existing DID moving its account here */
export type NewAccountKind = 'fresh' | 'moving-in'

/** why a new account of this kind is refused here, or undefined when the mode admits it */
export function creationRefusal(mode: AccountCreation, kind: NewAccountKind, inviteCode: string | undefined): Error | undefined {
  if (mode === 'closed') return xrpcError('InvalidRequest', 'This server is not accepting new accounts')
  if (mode === 'moving-in' && kind === 'fresh') {
    return xrpcError('InvalidRequest', 'This server only accepts accounts moving in from another server')
  }
  if (mode === 'invite' && !inviteCode) return xrpcError('InvalidInviteCode', 'An invite code is required on this server')
  return undefined
}

/** what a sign-up page says up front when no new account can be made here, else undefined */
export function signUpUnavailable(mode: AccountCreation): string | undefined {
  const refused = creationRefusal(mode, 'fresh', 'any code')
  return refused?.message
}

/**
 * describeServer's inviteCodeRequired: apps ask for a code, or warn, whenever an ordinary sign-up
 * cannot go through without one, so it is false only when anyone may sign up
 */
export const inviteCodeRequired = (mode: AccountCreation) => mode !== 'open'
