// com.atproto.admin.updateSubjectStatus: takedown (→ takendown) and its reversal (→ active) of an
// account, and administrative deactivation, each with its `#account` event. Record and blob
// subjects are not moderated by this server.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AdminAuth } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { accountByDid } from '../../../../account/admin-views.js'
import { activate, deactivate, restore, takedown } from '../../../../account/lifecycle.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.updateSubjectStatus<AdminAuth>(async ({ input }) => {
    const { subject, takedown: td, deactivated } = input.body
    const did = subject.$type === 'com.atproto.admin.defs#repoRef' ? (subject as { did?: unknown }).did : undefined
    if (typeof did !== 'string') {
      throw xrpcError('InvalidRequest', 'Only account subjects (com.atproto.admin.defs#repoRef) are moderated by this server')
    }
    const account = await accountByDid(db, did)
    if (account.status === 'deleted') throw xrpcError('InvalidRequest', 'The account is deleted')
    if (td) {
      if (td.applied) await takedown(db, did, td.ref ?? null)
      else await restore(db, did)
    }
    if (deactivated) {
      if (deactivated.applied) await deactivate(db, did)
      else await activate(db, did)
    }
    const after = await accountByDid(db, did)
    return {
      encoding: 'application/json',
      body: {
        subject: { $type: 'com.atproto.admin.defs#repoRef', did },
        takedown: { applied: after.status === 'takendown', ...(after.takedown_ref ? { ref: after.takedown_ref } : {}) },
      },
    }
  })
