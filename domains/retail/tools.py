"""Retail tools. Each is a typed function: the signature and docstring are what the agent sees.

The tools enforce the hard rules themselves (cancel only pending/processing orders, change the
address only while pending, returns and exchanges within 30 days of delivery). Other rules live only
in policy.md, as in a real back office, and the task checks verify them: above all, issue_refund
does not check that the return was received: refunding a return still `requested` is the trap.
"""

from datetime import datetime, timedelta
from typing import Literal

from endstate.api import Db, ToolError, customer_finder, tool

NOW = "2026-01-15T12:00:00"
# the tools' bookkeeping timestamp: a task's reward does not hang on it (core.grading.footprint)
FREE = ("updated_at",)
RETURN_WINDOW_DAYS = 30

# Example turns shown to token-level agents before the conversation (few-shot). Small models emit
# well-formed tool calls only after seeing a few. The entities are fictional: no task uses them.
EXAMPLES = [
    {"user": "Hi, I'm ella.moss@example.com. Where is my order W00001?",
     "tool": "find_customer", "arguments": {"email": "ella.moss@example.com"},
     "result": {"customer_id": "C0000"}, "reply": "Thanks, I found your account."},
    {"user": "Can you check order W00002 for me?",
     "tool": "get_order", "arguments": {"order_id": "W00002"},
     "result": {"id": "W00002", "status": "pending", "total": 12.5},
     "reply": "Order W00002 is pending; its total is $12.50."},
    {"user": "Please cancel order W00003, I ordered it by mistake. Yes, go ahead.",
     "tool": "cancel_order", "arguments": {"order_id": "W00003", "reason": "ordered_by_mistake"},
     "result": {"order_id": "W00003", "status": "cancelled"},
     "reply": "Done: order W00003 is cancelled and refunded."},
]


def _line(db: Db, order_id: str, line: int) -> dict:
    item = db.one("SELECT * FROM order_items WHERE order_id = ? AND line = ?", order_id, line)
    if item is None:
        raise ToolError(f"order {order_id} has no line {line}")
    return item


def _within_return_window(order: dict) -> None:
    if order["status"] != "delivered":
        raise ToolError(f"order {order['id']} is {order['status']}; only delivered orders can be "
                        "returned or exchanged")
    delivered = datetime.fromisoformat(order["delivered_at"])
    if datetime.fromisoformat(NOW) - delivered > timedelta(days=RETURN_WINDOW_DAYS):
        raise ToolError(f"order {order['id']} was delivered on {order['delivered_at'][:10]}, more "
                        f"than {RETURN_WINDOW_DAYS} days ago")


find_customer = customer_finder("Ava Chen")


@tool
def get_customer(db: Db, customer_id: str) -> dict:
    """Get a customer's profile and payment methods.

    Args:
        customer_id: The customer id, e.g. "C0042".
    """
    customer = db.get("customers", customer_id, "customer")
    customer["payment_methods"] = db.all(
        "SELECT id, kind, last4, balance FROM payment_methods WHERE customer_id = ?", customer_id)
    return customer


@tool
def list_orders(db: Db, customer_id: str, status: str | None = None) -> list:
    """List a customer's orders, newest first.

    Args:
        customer_id: The customer id.
        status: Only orders with this status (pending, processing, shipped, delivered, cancelled).
    """
    sql = "SELECT id, status, placed_at, total FROM orders WHERE customer_id = ?"
    params = [customer_id]
    if status:
        sql += " AND status = ?"
        params.append(status)
    return db.all(sql + " ORDER BY placed_at DESC", *params)


@tool
def get_order(db: Db, order_id: str) -> dict:
    """Get an order with its lines, returns and refunds.

    Args:
        order_id: The order id, e.g. "W10042".
    """
    order = db.get("orders", order_id, "order")
    order["items"] = db.all(
        "SELECT i.line, i.product_id, p.name, i.quantity, i.unit_price, i.status "
        "FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = ? "
        "ORDER BY i.line", order_id)
    order["returns"] = db.all("SELECT * FROM returns WHERE order_id = ?", order_id)
    order["refunds"] = db.all("SELECT * FROM refunds WHERE order_id = ?", order_id)
    return order


@tool
def search_products(db: Db, query: str, category: str | None = None) -> list:
    """Search products by name (case-insensitive substring), optionally within a category.

    Args:
        query: Words from the product name, e.g. "kettle".
        category: One of headphones, keyboards, lamps, backpacks, kettles, shoes, watches, mugs.
    """
    sql = "SELECT id, name, category, price, stock FROM products WHERE instr(lower(name), lower(?)) > 0"
    params = [query]
    if category:
        sql += " AND category = ?"
        params.append(category)
    return db.all(sql + " ORDER BY id LIMIT 20", *params)


@tool(writes=True)
def cancel_order(db: Db, order_id: str,
                 reason: Literal["no_longer_needed", "ordered_by_mistake"]) -> dict:
    """Cancel a pending or processing order and refund its total to the original payment method.

    Args:
        order_id: The order id.
        reason: Why the customer cancels.
    """
    order = db.get("orders", order_id, "order")
    if order["status"] not in ("pending", "processing"):
        raise ToolError(f"order {order_id} is {order['status']}; only pending or processing orders "
                        "can be cancelled")
    db.run("UPDATE orders SET status = 'cancelled', cancel_reason = ?, updated_at = ? WHERE id = ?",
           reason, db.now, order_id)
    refund_id = db.next_id("refunds", "RF", 5)
    db.run("INSERT INTO refunds VALUES (?, ?, NULL, ?, ?, ?)", refund_id, order_id, order["total"],
           order["payment_method_id"], db.now)
    return {"order_id": order_id, "status": "cancelled", "refund_id": refund_id,
            "refunded": order["total"]}


@tool(writes=True)
def update_shipping_address(db: Db, order_id: str, address: str) -> dict:
    """Change the shipping address of a pending order.

    Args:
        order_id: The order id.
        address: The full new address, e.g. "12 Oak St, Austin, TX 78701".
    """
    order = db.get("orders", order_id, "order")
    if order["status"] != "pending":
        raise ToolError(f"order {order_id} is {order['status']}; the address can only be changed "
                        "while the order is pending")
    db.run("UPDATE orders SET shipping_address = ?, updated_at = ? WHERE id = ?", address.strip(),
           db.now, order_id)
    return {"order_id": order_id, "shipping_address": address.strip()}


@tool(writes=True)
def update_customer_email(db: Db, customer_id: str, email: str) -> dict:
    """Change a customer's email address.

    Args:
        customer_id: The customer id.
        email: The new email address.
    """
    email = email.strip().lower()
    if "@" not in email:
        raise ToolError(f"{email!r} is not an email address")
    if db.run("UPDATE customers SET email = ? WHERE id = ?", email, customer_id) == 0:
        raise ToolError(f"customer {customer_id} not found")
    return {"customer_id": customer_id, "email": email}


@tool(writes=True)
def request_return(db: Db, order_id: str, line: int, quantity: int,
                   reason: Literal["defective", "wrong_item", "no_longer_needed"]) -> dict:
    """Open a return for one line of a delivered order (within 30 days of delivery).

    Args:
        order_id: The order id.
        line: The order line number (from get_order).
        quantity: How many units to return (at most the quantity ordered).
        reason: Why the item is returned.
    """
    order = db.get("orders", order_id, "order")
    _within_return_window(order)
    item = _line(db, order_id, line)
    if item["status"] != "ordered":
        raise ToolError(f"line {line} of order {order_id} is already {item['status']}")
    if not 1 <= quantity <= item["quantity"]:
        raise ToolError(f"quantity must be between 1 and {item['quantity']}")
    return_id = db.next_id("returns", "RT", 5)
    db.run("INSERT INTO returns VALUES (?, ?, ?, ?, ?, 'requested', ?, NULL)", return_id, order_id,
           line, quantity, reason, db.now)
    db.run("UPDATE order_items SET status = 'return_requested' WHERE order_id = ? AND line = ?",
           order_id, line)
    return {"return_id": return_id, "status": "requested"}


@tool(writes=True)
def issue_refund(db: Db, return_id: str) -> dict:
    """Refund a received return to the order's original payment method.

    Args:
        return_id: The return id, e.g. "RT00042".
    """
    ret = db.get("returns", return_id, "return")
    if db.one("SELECT id FROM refunds WHERE return_id = ?", return_id):
        raise ToolError(f"return {return_id} has already been refunded")
    item = _line(db, ret["order_id"], ret["line"])
    order = db.get("orders", ret["order_id"], "order")
    amount = round(item["unit_price"] * ret["quantity"], 2)
    refund_id = db.next_id("refunds", "RF", 5)
    db.run("INSERT INTO refunds VALUES (?, ?, ?, ?, ?, ?)", refund_id, ret["order_id"], return_id,
           amount, order["payment_method_id"], db.now)
    return {"refund_id": refund_id, "amount": amount}


@tool(writes=True)
def exchange_item(db: Db, order_id: str, line: int, new_product_id: str) -> dict:
    """Exchange one line of a delivered order for another product of the same category and price.

    Args:
        order_id: The order id.
        line: The order line number.
        new_product_id: The product to send instead, e.g. "P0123".
    """
    order = db.get("orders", order_id, "order")
    _within_return_window(order)
    item = _line(db, order_id, line)
    if item["status"] != "ordered":
        raise ToolError(f"line {line} of order {order_id} is already {item['status']}")
    old = db.one("SELECT * FROM products WHERE id = ?", item["product_id"])
    new = db.get("products", new_product_id, "product")
    if new["category"] != old["category"]:
        raise ToolError(f"{new_product_id} is in {new['category']}, not {old['category']}")
    if new["stock"] < item["quantity"]:
        raise ToolError(f"{new_product_id} has only {new['stock']} in stock")
    db.run("UPDATE order_items SET product_id = ?, status = 'exchanged' WHERE order_id = ? AND line = ?",
           new_product_id, order_id, line)
    db.run("UPDATE products SET stock = stock - ? WHERE id = ?", item["quantity"], new_product_id)
    return {"order_id": order_id, "line": line, "new_product_id": new_product_id,
            "price_difference": round((new["price"] - item["unit_price"]) * item["quantity"], 2)}


@tool(writes=True)
def transfer_to_human(db: Db, summary: str, customer_id: str | None = None,
                      order_id: str | None = None) -> dict:
    """Hand the case to a human agent, with a summary of what the customer needs and why.

    Args:
        summary: What the customer asked for and why you cannot do it.
        customer_id: The customer id, if known.
        order_id: The order concerned, if any.
    """
    escalation_id = db.next_id("escalations", "E", 5)
    db.run("INSERT INTO escalations VALUES (?, ?, ?, ?, ?)", escalation_id, customer_id, order_id,
           summary, db.now)
    return {"escalation_id": escalation_id, "message": "A human agent will follow up."}
