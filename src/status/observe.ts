import type { Inbox, RoutedDelivery } from '../core/ports/inbox.js';

/** What the tracker hears of the inbox: deliveries arriving and changing state. */
export interface InboxObserver {
  arrived(deliveryId: string, routed: RoutedDelivery): void;
  changed(deliveryId: string): void;
  workItemChanged(workItem: string): void;
}

/**
 * The inbox as the daemon uses it, telling an observer (the GitHub status tracker) of every change of
 * a delivery's state as it is written: arrival, claim, hold, finish, requeue, retry. Observing the
 * writes themselves (not the dispatcher's decisions) means no path that moves a delivery is missed.
 * The observer is called after the write returned, and never throws into it.
 */
export function observedInbox(inbox: Inbox, observer: InboxObserver): Inbox {
  const tell = (fn: () => void) => {
    try {
      fn();
    } catch {
      // The observer's failures are its own (it logs them); the inbox write stands.
    }
  };
  const workItemOf = async (id: string) => (await inbox.get(id))?.workItem ?? undefined;
  return Object.assign(Object.create(inbox) as Inbox, {
    acceptArriving: async (deliveries: Parameters<Inbox['acceptArriving']>[0]) => {
      const out = await inbox.acceptArriving(deliveries);
      out.forEach((routed, k) => {
        const d = deliveries[k];
        if (d && routed !== 'duplicate') tell(() => observer.arrived(d.id, routed));
      });
      return out;
    },
    applyClaims: async (writes: Parameters<Inbox['applyClaims']>[0]) => {
      const claimed = await inbox.applyClaims(writes);
      for (const c of claimed) tell(() => observer.changed(c.deliveryId));
      for (const h of writes.held) tell(() => observer.changed(h.deliveryId));
      return claimed;
    },
    finish: async (id: string, outcome: Parameters<Inbox['finish']>[1]) => {
      const result = await inbox.finish(id, outcome);
      tell(() => observer.changed(id));
      const workItem = await workItemOf(id).catch(() => undefined);
      if (workItem) tell(() => observer.workItemChanged(workItem));
      return result;
    },
    requeue: async (id: string) => {
      await inbox.requeue(id);
      tell(() => observer.changed(id));
    },
    retry: async (id: string) => {
      const record = await inbox.retry(id);
      tell(() => observer.changed(id));
      return record;
    },
  });
}
