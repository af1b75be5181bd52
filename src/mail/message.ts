// One outgoing message, as every provider and the branded wrapper take it.
export type Mail = { to: string; subject: string; text: string; html?: string; replyTo?: string }
