// com.atproto.server.resetPassword: the reset-password token is looked up by purpose and value,
// without the DID; a miss or expiry is 400 InvalidToken. Every session and OAuth grant of the
// account ends with the old password, so whoever stole one is out.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AuthFor } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { hashPassword, MAX_PASSWORD_LENGTH } from '../../../../account/password.js'
import { resetPasswordHash } from '../../../../account/passwords.js'

export const MIN_PASSWORD_LENGTH = 8

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.server.resetPassword<AuthFor<'com.atproto.server.resetPassword'>>(async ({ input }) => {
    const { token, password } = input.body
    // checked first, so a too-short password does not burn the token
    if (password.length < MIN_PASSWORD_LENGTH)
      throw xrpcError('InvalidPassword', `Passwords are at least ${MIN_PASSWORD_LENGTH} characters`)
    if (password.length > MAX_PASSWORD_LENGTH) throw xrpcError('InvalidPassword', `Passwords are at most ${MAX_PASSWORD_LENGTH} characters`)
    const hash = await hashPassword(password)
    await resetPasswordHash(db, token, hash)
  })
