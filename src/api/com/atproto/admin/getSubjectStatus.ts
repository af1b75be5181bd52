// com.atproto.admin.getSubjectStatus: an account's takedown and deactivation state.
import type { Server } from '../../../../generated/server/index.js'
import type { Services } from '../../../../context.js'
import type { AdminAuth } from '../../../../auth/verifier.js'
import { xrpcError } from '../../../../errors.js'
import { accountByDid, subjectStatus } from '../../../../account/admin-views.js'

export default (api: Server, { db }: Pick<Services, 'db'>) =>
  api.com.atproto.admin.getSubjectStatus<AdminAuth>(async ({ params }) => {
    if (!params.did) throw xrpcError('InvalidRequest', 'Only account subjects (did) are moderated by this server')
    return { encoding: 'application/json', body: subjectStatus(await accountByDid(db, params.did)) }
  })
